"""Parity: what an enqueue refuses before anything is written — a due time outside the stored
bounds, a concurrency or rate key that cannot be derived (issue 43 defects 5 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import Concurrency, JobContext, Rate, Retry, job
from xjobs.declare.job import JobHandle
from xjobs.enqueue.when import MAX_RUN_AT_MS
from xjobs.errors import KeyUnderivableError, OptionInvalidError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, within
from xjobs.testing.parity.stored import stored_ids

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("introspection")]

# a slot name standing for a key no backend can hold (the payload itself stays valid JSON text)
UNDERIVABLE = {"nul": "a\x00b", "long": "s" * 513, "empty": ""}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Slotted(BaseModel):
    """An input whose `slot` names the concurrency or rate key its run derives."""

    key: str = "k-1"
    slot: str = "slot-1"


def slot_of(value: Slotted) -> str:
    """The key a run derives from `slot`: an odd one, or a raise, when the slot names one."""
    if value.slot == "raise":
        raise LookupError("no such account")
    return UNDERIVABLE.get(value.slot, value.slot)


def key_of(value: Slotted) -> str:
    return value.key


def _keyed_jobs() -> list[JobHandle[Any]]:
    """One job keyed by concurrency, one by rate: each derives `slot_of` at admission."""

    @job(
        tenant="none",
        idempotency_key=key_of,
        queue=QUEUE,
        concurrency=Concurrency(key=slot_of, limit=1),
    )
    async def by_slot(ctx: JobContext, input: Slotted) -> None:
        return None

    @job(
        tenant="none",
        idempotency_key=key_of,
        queue=QUEUE,
        rate=[
            Rate(limit=100, per=timedelta(seconds=1)),
            Rate(limit=5, per=timedelta(seconds=1), key=slot_of),
        ],
    )
    async def by_rate(ctx: JobContext, input: Slotted) -> None:
        return None

    return [by_slot, by_rate]


class TestDueTimeBounds:
    @pytest.mark.parametrize(
        ("option", "value"),
        [
            ("delay", 1e300),
            ("delay", timedelta.max),
            ("delay", timedelta(days=3_000_000)),
            ("run_at", datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)),
            ("run_at", datetime(1, 1, 1, tzinfo=UTC)),
        ],
        ids=[
            "delay-1e300s",
            "delay-timedelta.max",
            "delay-past-9999",
            "run_at-1969",
            "run_at-year-1",
        ],
    )
    async def test_a_due_time_outside_the_bounds_is_refused_and_nothing_is_written(
        self, parity: ParityEnv, option: str, value: Any
    ) -> None:
        """Rule: a run_at/delay landing before the epoch or after 9999-12-31 23:59:59.999 UTC is
        XJOBS_OPTION_INVALID, refused before anything is written."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Slotted) -> None:
            return None

        when: dict[str, Any] = {option: value}
        async with parity.app([body]):
            with pytest.raises(OptionInvalidError) as refused:
                await body.enqueue(Slotted(), **when)
            with pytest.raises(OptionInvalidError):
                await body.enqueue_many([Slotted(key="a"), Slotted(key="b")], **when)
            assert await stored_ids(parity) == set()
        assert refused.value.code == "XJOBS_OPTION_INVALID"
        assert option in refused.value.message

    async def test_one_millisecond_past_the_bound_is_refused(self, parity: ParityEnv) -> None:
        """Rule: the bound is exact: a delay landing 1 ms after it is refused, one landing on it is kept."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Slotted) -> None:
            return None

        to_bound = timedelta(milliseconds=MAX_RUN_AT_MS - parity.clock.now_ms())
        async with parity.app([body]) as app:
            with pytest.raises(OptionInvalidError):
                await body.enqueue(Slotted(key="over"), delay=to_bound + timedelta(milliseconds=1))
            kept = await body.enqueue(Slotted(key="on"), delay=to_bound)
            record = await app.get_job(kept.job_id)
        assert record.run_at_ms == MAX_RUN_AT_MS

    async def test_the_bounds_themselves_are_stored_and_read_back_exactly(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the latest and the earliest due time round-trip on every backend: the record, the
        operator's list and detail all read them back (a Redis read of a huge score once raised)."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Slotted) -> None:
            return None

        latest_at = datetime.max.replace(tzinfo=UTC)
        async with parity.app([body]) as app:
            latest = await body.enqueue(Slotted(key="latest"), run_at=latest_at)
            earliest = await body.enqueue(Slotted(key="earliest"), run_at=EPOCH)
            records = [await app.get_job(r.job_id) for r in (latest, earliest)]
            details = [await app.operator.get_job(r.job_id) for r in (latest, earliest)]
            listed = await app.operator.list_jobs()
        assert [r.run_at_ms for r in records] == [MAX_RUN_AT_MS, 0]
        assert [d.record.run_at_ms for d in details] == [MAX_RUN_AT_MS, 0]
        assert sorted(s.run_at_ms for s in listed.jobs) == [0, MAX_RUN_AT_MS]


class TestKeysDerivedAtEnqueue:
    @pytest.mark.parametrize("slot", ["nul", "long", "empty", "raise"])
    @pytest.mark.parametrize("which", [0, 1], ids=["concurrency", "rate"])
    async def test_an_underivable_key_is_refused_at_enqueue_and_nothing_is_written(
        self, parity: ParityEnv, slot: str, which: int
    ) -> None:
        """Rule: a concurrency or rate key that cannot be derived (NUL, over 512 characters, empty,
        a raising key function) is XJOBS_KEY_UNDERIVABLE at enqueue, before anything is written,
        for one input or any input of a batch."""
        handles = _keyed_jobs()
        handle = handles[which]
        async with parity.app(handles):
            with pytest.raises(KeyUnderivableError) as refused:
                await handle.enqueue(Slotted(slot=slot))
            with pytest.raises(KeyUnderivableError):
                await handle.enqueue_many(
                    [Slotted(key="a"), Slotted(key="b", slot=slot), Slotted(key="c")]
                )
            assert await stored_ids(parity) == set()
        assert refused.value.code == "XJOBS_KEY_UNDERIVABLE"
        assert "key" in refused.value.message

    async def test_a_key_of_512_characters_is_accepted(self, parity: ParityEnv) -> None:
        """Rule: 512 characters is the limit, not past it."""
        by_slot, by_rate = _keyed_jobs()
        async with parity.app([by_slot, by_rate]):
            slotted = await by_slot.enqueue(Slotted(slot="s" * 512))
            rated = await by_rate.enqueue(Slotted(slot="s" * 512))
        assert (slotted.deduped, rated.deduped) == (False, False)


class TestKeysUnderivableAtAdmission:
    @pytest.mark.parametrize(
        "capability",
        [
            pytest.param("slots", marks=pytest.mark.requires("slots")),
            pytest.param("rates", marks=pytest.mark.requires("rates")),
        ],
    )
    async def test_a_key_that_fails_at_admission_fails_the_job_for_good(
        self, parity: ParityEnv, capability: str
    ) -> None:
        """Rule: a key that derived at enqueue but not when a worker admits the run (a key
        function that changed, a row of an older release) fails the attempt terminally — never
        retried, the body never runs — and the round goes on."""
        ran: list[str] = []
        broken: set[str] = set()

        def slot_unless_broken(value: Slotted) -> str:
            if value.slot in broken:
                raise LookupError(f"slot {value.slot!r} is gone")
            return value.slot

        slotted = capability == "slots"
        rated = capability == "rates"

        @job(
            tenant="none",
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=3, base=timedelta(0), cap=timedelta(0)),
            concurrency=Concurrency(key=slot_unless_broken, limit=1) if slotted else None,
            rate=Rate(limit=100, per=timedelta(seconds=1), key=slot_unless_broken)
            if rated
            else None,
        )
        async def body(ctx: JobContext, input: Slotted) -> None:
            ran.append(input.key)

        async with parity.app([body]) as app:
            bad, good = await body.enqueue_many(
                [Slotted(key="bad", slot="gone"), Slotted(key="good", slot="kept")]
            )
            broken.add("gone")
            stats = await within(
                app.run_worker(lease=LEASE, until_idle=True), what="an idle worker"
            )
            failed = await app.get_job(bad.job_id)
            done = await app.get_job(good.job_id)
        assert ran == ["good"]
        assert (failed.state, failed.attempt) == ("dead", 1)
        assert failed.last_error is not None
        assert "XJOBS_KEY_UNDERIVABLE" in failed.last_error
        assert done.state == "completed"
        assert (stats.retried, stats.completed) == (0, 1)
