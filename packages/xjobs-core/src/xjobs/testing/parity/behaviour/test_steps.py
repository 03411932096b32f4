"""Parity: durable steps through the public API — memoized runs, sleeps, event waits (semantics.md, "Durable steps")."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from xjobs import App, JobContext, Retry, StepFailedError, Terminal, job
from xjobs.contract.driver import WAIT_FOREVER_MS
from xjobs.contract.stores import StepRecord, StepStore
from xjobs.errors import EventInvalidError, PayloadInvalidError, XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import NOW_RETRY, QUEUE, Item, SettledLog, key_of, org_of

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("steps")]

MINUTE = timedelta(minutes=1)


class Boom(Exception):
    """An ordinary error: the attempt retries."""


class Receipt(BaseModel):
    total: int
    currency: str = "EUR"


class CountingSteps:
    """A step store that counts `list` calls on the real one."""

    def __init__(self, inner: StepStore) -> None:
        self.inner = inner
        self.lists = 0

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        self.lists += 1
        return await self.inner.list(run_id, queue)

    async def put(self, claim: object, record: StepRecord) -> bool:
        return await self.inner.put(claim, record)  # type: ignore[arg-type]


def _ms(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


def _calls() -> dict[str, int]:
    return {}


def _bump(calls: dict[str, int], name: str) -> None:
    calls[name] = calls.get(name, 0) + 1


class TestStepRun:
    async def test_a_replay_returns_recorded_results_without_calling_the_functions(
        self, parity: ParityEnv
    ) -> None:
        """Rule: step.run memoizes; a retried attempt replays steps one and two without calling them."""
        calls = _calls()

        def first() -> int:
            _bump(calls, "first")
            return 1

        async def second(n: int, *, plus: int) -> int:
            _bump(calls, "second")
            return n + plus

        seen: list[tuple[int, int]] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            a = await ctx.step.run("first", first)
            b = await ctx.step.run("second", second, a, plus=41)
            seen.append((a, b))
            if ctx.attempt == 1:
                raise Boom("crash after step two")

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("completed", 2)
        assert calls == {"first": 1, "second": 1}
        assert seen == [(1, 42), (1, 42)]

    async def test_the_result_is_stored_before_run_returns(self, parity: ParityEnv) -> None:
        """Rule: the result is persisted (JSON) BEFORE step.run returns."""
        stored: list[list[tuple[str, str, str | None]]] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("pick", lambda: {"sku": "A-1", "qty": 2})
            steps = await app.get_steps(ctx.job_id)
            stored.append([(s.name, s.status, s.result) for s in steps])

        app = parity.app(jobs=[flow])
        async with app:
            await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert len(stored) == 1
        ((name, status, text),) = stored[0]
        assert (name, status) == ("pick", "done")
        assert text is not None
        assert json.loads(text) == {"sku": "A-1", "qty": 2}

    async def test_a_pydantic_result_comes_back_as_its_model_on_replay(
        self, parity: ParityEnv
    ) -> None:
        """Rule: results are pydantic-aware: the function's return annotation rebuilds the model."""
        seen: list[object] = []

        async def charge() -> Receipt:
            return Receipt(total=70)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            seen.append(await ctx.step.run("charge", charge))
            if ctx.attempt == 1:
                raise Boom("replay me")

        async with parity.app(jobs=[flow]) as app:
            await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert seen == [Receipt(total=70), Receipt(total=70)]
        assert all(isinstance(value, Receipt) for value in seen)

    async def test_an_unannotated_result_is_its_json_form_live_and_on_replay(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a step answers what its stored JSON decodes to, the same live as on a replay."""
        seen: list[object] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            seen.append(await ctx.step.run("pair", lambda: (1, "two", None)))
            if ctx.attempt == 1:
                raise Boom("replay me")

        async with parity.app(jobs=[flow]) as app:
            await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert seen == [[1, "two", None], [1, "two", None]]

    async def test_a_run_hydrates_its_steps_with_one_list(self, parity: ParityEnv) -> None:
        """Rule: a run's steps are hydrated with ONE store.list(run_id), however many steps it has."""
        assert parity.backend.steps is not None
        counting = CountingSteps(parity.backend.steps)
        backend = replace(parity.backend, steps=counting)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            for n in range(5):
                await ctx.step.run(f"s{n}", lambda n=n: n)
            await asyncio.gather(*(ctx.step.run(f"p{n}", lambda n=n: n) for n in range(3)))
            if ctx.attempt == 1:
                raise Boom("replay me")

        async with App(backend, jobs=[flow], clock=parity.clock) as app:
            await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert counting.lists == 2  # one per attempt

    async def test_a_step_name_used_twice_in_a_run_fails_for_good(self, parity: ParityEnv) -> None:
        """Rule: step names are unique within a run (`XJOBS_STEP_DUPLICATE`, terminal)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("same", lambda: 1)
            await ctx.step.run("same", lambda: 2)

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("dead", 1)
        assert record.last_error is not None
        assert "XJOBS_STEP_DUPLICATE" in record.last_error

    async def test_a_result_that_is_not_json_fails_for_good(self, parity: ParityEnv) -> None:
        """Rule: a step's result must be storable as JSON (`XJOBS_STEP_INVALID`, terminal)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("handle", lambda: object())

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
        assert (record.state, record.attempt) == ("dead", 1)
        assert record.last_error is not None
        assert "XJOBS_STEP_INVALID" in record.last_error
        assert steps == []


class TestStepErrors:
    async def test_a_failed_step_is_recorded_and_runs_again_on_the_retry(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a step error is recorded; when it ended the attempt, the retry runs the step again."""
        calls = _calls()
        errors: list[StepRecord] = []

        def flaky() -> str:
            _bump(calls, "flaky")
            if calls["flaky"] == 1:
                raise Boom("the gateway timed out")
            return "ok"

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> str:
            if ctx.attempt == 2:
                errors.extend(await app.get_steps(ctx.job_id))
            return await ctx.step.run("flaky", flaky)

        app = parity.app(jobs=[flow])
        async with app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
        assert (record.state, record.attempt, calls["flaky"]) == ("completed", 2, 2)
        assert record.last_error is not None
        assert "XJOBS_STEP_FAILED" in record.last_error
        ((recorded,),) = (errors,)
        assert recorded.status == "error"
        assert recorded.error is not None
        assert json.loads(recorded.error) == {
            "type": "Boom",
            "message": "the gateway timed out",
            "terminal": False,
        }
        assert [(s.name, s.status) for s in steps] == [("flaky", "done")]

    async def test_an_error_the_run_moved_past_is_replayed_not_rerun(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a recorded error the body caught and went on from is raised again on the replay,
        without calling the function, so the body takes the same branch."""
        calls = _calls()
        branches: list[str] = []

        def charge() -> None:
            _bump(calls, "charge")
            raise Boom("card declined")

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            try:
                await ctx.step.run("charge", charge)
                branches.append("charged")
            except StepFailedError as failure:
                branches.append(f"declined:{failure.error_type}:{failure.terminal}")
                await ctx.step.run("notify", lambda: _bump(calls, "notify"))
            if ctx.attempt == 1:
                raise Boom("crash after the compensation")

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("completed", 2)
        assert calls == {"charge": 1, "notify": 1}
        assert branches == ["declined:Boom:False", "declined:Boom:False"]

    async def test_a_terminal_step_error_fails_the_job_and_a_requeue_runs_the_step_again(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a step raising `Terminal` fails the job for good (its StepFailedError is terminal);
        the job's run did not move past it, so an operator's requeue runs the step again, while
        the steps before it replay."""
        calls = _calls()

        def reserve() -> str:
            _bump(calls, "reserve")
            return "r-1"

        def bill() -> str:
            _bump(calls, "bill")
            if calls["bill"] == 1:
                raise Terminal("the invoice was deleted")
            return "b-1"

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("reserve", reserve)
            await ctx.step.run("bill", bill)

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            failed = await app.get_job(result.job_id)
            await app.requeue_job(result.job_id)
            await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (failed.state, failed.attempt) == ("dead", 1)
        assert failed.last_error is not None
        assert "Terminal" in failed.last_error
        assert (done.state, done.run_id) == ("completed", failed.run_id)
        assert calls == {"reserve": 1, "bill": 2}

    async def test_step_timeout_cancels_the_step_then_fails_the_attempt(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `step_timeout` CANCELS the step, then fails the attempt; the step is not recorded,
        and the body cannot catch its way past it."""
        reached: list[str] = []
        cancelled = asyncio.Event()

        async def slow() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=1),
            step_timeout=timedelta(milliseconds=50),
        )
        async def flow(ctx: JobContext, input: Item) -> None:
            try:
                await ctx.step.run("slow", slow)
            except XJobsError as error:
                reached.append(error.code)
                await ctx.step.run("after", lambda: reached.append("after"))

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
        assert cancelled.is_set()
        assert record.state == "dead"
        assert record.last_error is not None
        assert "XJOBS_STEP_TIMEOUT" in record.last_error
        assert "after" not in reached
        assert steps == []


class TestSleep:
    async def test_a_sleep_parks_the_job_uncounted_until_its_wake_time(
        self, parity: ParityEnv
    ) -> None:
        """Rule: step.sleep suspends: the job is `waiting`, the attempt handed back, due at the wake
        time; it resumes with the same run id and replays the steps before the sleep."""
        calls = _calls()
        runs: list[str] = []
        settled = SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, on_settled=settled)
        async def flow(ctx: JobContext, input: Item) -> None:
            runs.append(ctx.run_id)
            await ctx.step.run("before", lambda: _bump(calls, "before"))
            await ctx.step.sleep("nap", timedelta(hours=1))
            await ctx.step.run("after", lambda: _bump(calls, "after"))

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            start = parity.clock.now_ms()
            first = await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            parity.clock.advance(_ms(timedelta(minutes=59)))
            early = await app.run_worker(until_idle=True)
            parity.clock.advance(_ms(timedelta(minutes=2)))
            late = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (parked.state, parked.attempt, parked.run_at_ms) == (
            "waiting",
            0,
            start + 3_600_000,
        )
        assert (first.suspended, early.claimed, late.completed) == (1, 0, 1)
        assert (done.state, done.attempt) == ("completed", 1)
        assert calls == {"before": 1, "after": 1}
        assert runs == [result.run_id, result.run_id]
        assert settled.outcomes() == ["completed"]

    async def test_a_recorded_wake_time_holds_across_replays(self, parity: ParityEnv) -> None:
        """Rule: the wake time is recorded once; a later replay (a retry after the sleep) passes the
        elapsed sleep at once instead of sleeping again."""
        after: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.sleep("nap", MINUTE)
            after.append(ctx.attempt)
            if ctx.attempt == 1:
                raise Boom("fail after the sleep")

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            (before,) = await app.get_steps(result.job_id)
            parity.clock.advance(_ms(timedelta(seconds=61)))
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
            (later,) = await app.get_steps(result.job_id)
        assert (record.state, record.attempt, after) == ("completed", 2, [1, 2])
        assert (stats.retried, stats.suspended, stats.completed) == (1, 0, 1)
        assert before == later

    async def test_sleep_until_needs_an_aware_datetime(self, parity: ParityEnv) -> None:
        """Rule: sleep_until refuses a naive datetime (`XJOBS_STEP_INVALID`) and the job fails for good."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.sleep_until("later", datetime(2030, 1, 1))

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert record.state == "dead"
        assert record.last_error is not None
        assert "XJOBS_STEP_INVALID" in record.last_error

    async def test_sleep_until_parks_until_the_instant(self, parity: ParityEnv) -> None:
        """Rule: sleep_until parks the job until the given instant."""
        when = datetime.fromtimestamp(parity.clock.now_ms() / 1000 + 7200, tz=UTC)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.sleep_until("later", when)

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            parity.clock.advance(_ms(timedelta(hours=2)))
            await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (parked.state, parked.run_at_ms) == ("waiting", round(when.timestamp() * 1000))
        assert done.state == "completed"


@pytest.mark.requires("events")
class TestWaitForEvent:
    async def test_a_matching_event_wakes_the_waiting_run_with_its_payload(
        self, parity: ParityEnv
    ) -> None:
        """Rule: wait_for_event parks the run; a matching event sent later wakes it and the step
        answers the event's payload; a non-matching one does not."""
        seen: list[object] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            payload = await ctx.step.wait_for_event(
                "paid", "order.paid", match={"order": input.key}, timeout=timedelta(days=3)
            )
            seen.append(payload)

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item(key="o-7"))
            await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            await app.send_event("order.paid", {"order": "o-8"}, tenant="org-1")
            missed = await app.run_worker(until_idle=True)
            await app.send_event("order.paid", {"order": "o-7", "amount": 12.5}, tenant="org-1")
            woke = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (parked.state, parked.attempt) == ("waiting", 0)
        assert parked.run_at_ms == parity.clock.now_ms() + 3 * 86_400_000
        assert (missed.claimed, woke.completed) == (0, 1)
        assert seen == [{"order": "o-7", "amount": 12.5}]
        assert (done.state, done.attempt) == ("completed", 1)

    async def test_a_wait_without_timeout_is_due_only_when_its_event_comes(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a wait with no timeout parks at WAIT_FOREVER_MS; only the event makes it due."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> object:
            return await ctx.step.wait_for_event("signed", "contract.signed")

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            parity.clock.advance(_ms(timedelta(days=365)))
            idle = await app.run_worker(until_idle=True)
            await app.send_event("contract.signed", {"by": "ada"}, tenant="org-1")
            await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert parked.run_at_ms == WAIT_FOREVER_MS
        assert idle.claimed == 0
        assert done.state == "completed"

    async def test_the_wait_times_out_to_none_on_the_bus_clock(self, parity: ParityEnv) -> None:
        """Rule: past its timeout (decided by the bus's clock) the wait answers None; an event sent
        after that does not change the recorded answer."""
        seen: list[object] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            seen.append(
                await ctx.step.wait_for_event("reply", "ticket.reply", timeout=timedelta(hours=1))
            )
            if len(seen) == 1:
                raise Boom("replay the answer")

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            parity.clock.advance(_ms(timedelta(hours=1, seconds=1)))
            await app.run_worker(until_idle=True)
            await app.send_event("ticket.reply", {"text": "too late"}, tenant="org-1")
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert seen == [None, None]
        assert record.state == "completed"

    async def test_an_event_sent_before_the_wait_began_is_not_seen(self, parity: ParityEnv) -> None:
        """Rule: a wait answers events sent at or after its start, never older ones."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> object:
            return await ctx.step.wait_for_event("go", "launch.go", timeout=MINUTE)

        async with parity.app(jobs=[flow]) as app:
            await app.send_event("launch.go", {"early": True}, tenant="org-1")
            parity.clock.advance(_ms(timedelta(seconds=1)))
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
        assert parked.state == "waiting"

    async def test_event_poll_bounds_how_long_a_waiting_run_sleeps(self, parity: ParityEnv) -> None:
        """Rule: a job declaring `event_poll` is due again within that bound while it waits."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            event_poll=timedelta(seconds=30),
        )
        async def flow(ctx: JobContext, input: Item) -> object:
            return await ctx.step.wait_for_event("go", "launch.go", timeout=timedelta(days=1))

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            await app.run_worker(until_idle=True)
            parked = await app.get_job(result.job_id)
            parity.clock.advance(_ms(timedelta(seconds=31)))
            again = await app.run_worker(until_idle=True)
            still = await app.get_job(result.job_id)
        assert parked.run_at_ms == parity.clock.now_ms() - 31_000 + 30_000
        assert (again.claimed, again.suspended) == (1, 1)
        assert (still.state, still.attempt, still.claims) == ("waiting", 0, 2)

    async def test_send_event_refuses_what_is_not_a_json_object(self, parity: ParityEnv) -> None:
        """Rule: bad input gets a clear error: a bad name or a non-object payload is
        `XJOBS_EVENT_INVALID`, a NUL is `XJOBS_PAYLOAD_INVALID`, as on every backend."""
        async with parity.app() as app:
            with pytest.raises(EventInvalidError):
                await app.send_event("bad name!", {})
            with pytest.raises(EventInvalidError):
                await app.send_event("order.paid", [1, 2])  # type: ignore[arg-type]
            with pytest.raises(EventInvalidError):
                await app.send_event("order.paid", {"when": datetime.now(UTC)})
            with pytest.raises(PayloadInvalidError):
                await app.send_event("order.paid", {"note": "a\x00b"})
