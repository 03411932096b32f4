"""Parity: debounce and throttle on the idempotency namespace (docs/flow-control.md)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import BaseModel

from xjobs import JobContext, job
from xjobs.errors import OptionInvalidError
from xjobs.run.settle import retrying
from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

WINDOW_MS = 5_000


class Edit(BaseModel):
    """A scenario input: the key its job is debounced or throttled on, and a text that varies."""

    key: str
    text: str


def key_of_edit(value: Edit) -> str:
    """The idempotency key of an `Edit`."""
    return value.key


async def payload_of(parity: ParityEnv, job_id: str) -> object:
    """The decoded payload the job holds now."""
    return json.loads((await parity.record(job_id)).payload)


class TestDebounce:
    async def test_a_first_debounced_enqueue_creates_a_job_due_after_the_window(
        self, parity: ParityEnv
    ) -> None:
        """Rule: with no job in the namespace, a debounced enqueue creates one, due now + window."""
        now = parity.clock.now_ms()
        row = parity.new_job(idempotency_key="k1", debounce_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([row])
        assert (result.job_id, result.deduped) == (row.id, False)
        record = await parity.record(row.id)
        assert (record.state, record.run_at_ms) == ("ready", now + WINDOW_MS)
        assert (await parity.claim()).jobs == ()

    async def test_a_burst_moves_the_one_job_to_the_last_input_and_the_last_window(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a debounced enqueue into an unclaimed job replaces its input and pushes its run_at
        to now + window, answering that job with `deduped=True`; it runs once, with the LAST input."""
        first = parity.new_job(idempotency_key="k1", payload='{"n": 1}', debounce_ms=WINDOW_MS)
        (a,) = await parity.backend.jobs.enqueue([first])
        parity.clock.advance(3_000)
        second = parity.new_job(idempotency_key="k1", payload='{"n": 2}', debounce_ms=WINDOW_MS)
        (b,) = await parity.backend.jobs.enqueue([second])
        parity.clock.advance(3_000)
        third = parity.new_job(idempotency_key="k1", payload='{"n": 3}', debounce_ms=WINDOW_MS)
        (c,) = await parity.backend.jobs.enqueue([third])
        assert [(r.job_id, r.run_id, r.deduped) for r in (b, c)] == [(a.job_id, a.run_id, True)] * 2
        assert await parity.backend.jobs.get(second.id) is None
        record = await parity.record(a.job_id)
        assert (record.payload, record.run_at_ms) == ('{"n": 3}', parity.clock.now_ms() + WINDOW_MS)
        parity.clock.advance(WINDOW_MS - 1)
        assert (await parity.claim()).jobs == ()  # 6 s after the first enqueue: still quiet-waiting
        parity.clock.advance(1)
        claimed = await parity.claim_one()
        assert (claimed.id, claimed.payload) == (a.job_id, '{"n": 3}')
        assert (await parity.claim()).jobs == ()

    async def test_a_debounced_enqueue_into_a_running_job_answers_it_unchanged(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a claimed job is never rewritten; its live namespace answers the enqueue (deduped)."""
        running = await parity.job_in_state("running", idempotency_key="k1", payload='{"n": 1}')
        row = parity.new_job(idempotency_key="k1", payload='{"n": 2}', debounce_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([row])
        assert (result.job_id, result.deduped) == (running.id, True)
        record = await parity.record(running.id)
        assert (record.state, record.payload) == ("running", '{"n": 1}')

    async def test_a_retry_waiting_for_its_backoff_is_not_rewritten(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only a job no claim took yet (ready, claims 0) takes a debounced input."""
        row = await parity.enqueue(idempotency_key="k1", payload='{"n": 1}')
        claimed = await parity.claim_one()
        retry_at = parity.clock.now_ms() + 60_000
        assert await parity.backend.jobs.nack(claimed.claim, retrying("boom", retry_at))
        again = parity.new_job(idempotency_key="k1", payload='{"n": 2}', debounce_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([again])
        assert (result.job_id, result.deduped) == (row.id, True)
        record = await parity.record(row.id)
        assert (record.payload, record.run_at_ms) == ('{"n": 1}', retry_at)

    async def test_a_debounced_enqueue_after_the_job_finished_creates_a_new_one(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a finished job holds no namespace, so the next burst starts a new job."""
        done = await parity.job_in_state("completed", idempotency_key="k1")
        row = parity.new_job(idempotency_key="k1", debounce_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([row])
        assert (result.job_id, result.deduped) == (row.id, False)
        assert result.job_id != done.id

    async def test_a_repeated_id_answers_its_job_untouched(self, parity: ParityEnv) -> None:
        """Rule: a row whose id names a job (a repeated publish) answers it and changes nothing."""
        row = parity.new_job(idempotency_key="k1", payload='{"n": 1}', debounce_ms=WINDOW_MS)
        await parity.backend.jobs.enqueue([row])
        before = await parity.record(row.id)
        parity.clock.advance(1_000)
        (again,) = await parity.backend.jobs.enqueue([row])
        assert (again.job_id, again.deduped) == (row.id, True)
        assert (await parity.record(row.id)).run_at_ms == before.run_at_ms

    async def test_other_namespaces_are_debounced_apart(self, parity: ParityEnv) -> None:
        """Rule: the window is per namespace (name, tenant, key); one batch may hold several."""
        rows = [
            parity.new_job(idempotency_key=key, tenant_id=tenant, debounce_ms=WINDOW_MS)
            for key, tenant in (("k1", None), ("k2", None), ("k1", "org-1"))
        ]
        results = await parity.backend.jobs.enqueue(rows)
        assert [(r.job_id, r.deduped) for r in results] == [(row.id, False) for row in rows]


class TestThrottle:
    async def test_the_first_throttled_enqueue_runs_now(self, parity: ParityEnv) -> None:
        """Rule: throttle never delays the job it lets through."""
        row = parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([row])
        assert (result.job_id, result.deduped) == (row.id, False)
        assert (await parity.claim_one()).id == row.id

    async def test_the_window_answers_the_first_job_live_or_finished(
        self, parity: ParityEnv
    ) -> None:
        """Rule: within the window since the first throttled enqueue, every throttled enqueue of
        the namespace answers that job (deduped), even once it finished; after it, one runs again."""
        first = parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)
        (a,) = await parity.backend.jobs.enqueue([first])
        (b,) = await parity.backend.jobs.enqueue(
            [parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)]
        )
        assert (b.job_id, b.run_id, b.deduped) == (a.job_id, a.run_id, True)
        claimed = await parity.claim_one()
        assert await parity.backend.jobs.ack(claimed.claim)
        parity.clock.advance(WINDOW_MS - 1)
        (c,) = await parity.backend.jobs.enqueue(
            [parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)]
        )
        assert (c.job_id, c.deduped) == (a.job_id, True)
        assert (await parity.record(a.job_id)).state == "completed"
        parity.clock.advance(1)
        later = parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)
        (d,) = await parity.backend.jobs.enqueue([later])
        assert (d.job_id, d.deduped) == (later.id, False)

    async def test_a_plain_enqueue_is_not_throttled(self, parity: ParityEnv) -> None:
        """Rule: the window binds throttled enqueues only; a plain one follows the live rule."""
        await parity.job_in_state("completed", idempotency_key="k1", throttle_ms=WINDOW_MS)
        plain = parity.new_job(idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([plain])
        assert (result.job_id, result.deduped) == (plain.id, False)

    async def test_a_live_plain_job_still_dedupes_a_throttled_enqueue(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the live namespace dedupes a throttled enqueue as it dedupes any."""
        live = await parity.enqueue(idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue(
            [parity.new_job(idempotency_key="k1", throttle_ms=WINDOW_MS)]
        )
        assert (result.job_id, result.deduped) == (live.id, True)

    async def test_another_tenant_has_its_own_window(self, parity: ParityEnv) -> None:
        """Rule: the window is per namespace, the tenant included."""
        await parity.enqueue(idempotency_key="k1", tenant_id="org-1", throttle_ms=WINDOW_MS)
        other = parity.new_job(idempotency_key="k1", tenant_id="org-2", throttle_ms=WINDOW_MS)
        (result,) = await parity.backend.jobs.enqueue([other])
        assert (result.job_id, result.deduped) == (other.id, False)


class TestThroughTheHandle:
    async def test_a_debounced_batch_applies_each_key_in_order(self, parity: ParityEnv) -> None:
        """Rule: `enqueue_many(debounce=)` acts as that many enqueues: per key, one job, holding
        the key's last input; the key's later inputs answer it with `deduped=True`."""

        @job(tenant="none", idempotency_key=key_of_edit, queue="parity", name="debounced")
        async def debounced(ctx: JobContext, input: Edit) -> None:
            return None

        inputs = [Edit(key="a", text="1"), Edit(key="b", text="1"), Edit(key="a", text="2")]
        async with parity.app([debounced]):
            results = await debounced.enqueue_many(inputs, debounce=timedelta(seconds=5))
            again = await debounced.enqueue(Edit(key="b", text="2"), debounce=timedelta(seconds=5))
        assert [r.deduped for r in results] == [False, False, True]
        assert results[2].job_id == results[0].job_id != results[1].job_id
        assert (again.job_id, again.deduped) == (results[1].job_id, True)
        assert await payload_of(parity, results[0].job_id) == {"key": "a", "text": "2"}
        assert await payload_of(parity, results[1].job_id) == {"key": "b", "text": "2"}

    async def test_a_throttled_batch_runs_the_first_input_of_each_key(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `enqueue_many(throttle=)`: per key the first input is the job, the rest answer it."""

        @job(tenant="none", idempotency_key=key_of_edit, queue="parity", name="throttled")
        async def throttled(ctx: JobContext, input: Edit) -> None:
            return None

        inputs = [Edit(key="a", text="1"), Edit(key="a", text="2")]
        async with parity.app([throttled]):
            first, second = await throttled.enqueue_many(inputs, throttle=timedelta(seconds=5))
        assert (second.job_id, first.deduped, second.deduped) == (first.job_id, False, True)
        assert await payload_of(parity, first.job_id) == {"key": "a", "text": "1"}

    @pytest.mark.parametrize(
        "options",
        [
            {"debounce": timedelta(seconds=1), "throttle": timedelta(seconds=1)},
            {"debounce": timedelta(seconds=-1)},
            {"throttle": timedelta(0)},
            {"debounce": timedelta(seconds=1), "delay": timedelta(seconds=1)},
            {"debounce": float("nan")},
        ],
        ids=["both", "negative", "zero", "with-delay", "nan"],
    )
    async def test_bad_flow_options_are_refused_before_anything_is_written(
        self, parity: ParityEnv, options: dict[str, object]
    ) -> None:
        """Rule: a bad window or a clash raises `XJOBS_OPTION_INVALID` and writes nothing."""

        @job(tenant="none", idempotency_key=key_of_edit, queue="parity", name="refused")
        async def refused(ctx: JobContext, input: Edit) -> None:
            return None

        async with parity.app([refused]):
            with pytest.raises(OptionInvalidError) as caught:
                await refused.enqueue(Edit(key="a", text="1"), **options)  # type: ignore[arg-type]
            assert caught.value.code == "XJOBS_OPTION_INVALID"
            after = await refused.enqueue(Edit(key="a", text="2"))
        assert after.deduped is False
