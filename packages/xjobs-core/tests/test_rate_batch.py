"""The rate gate coalesces the takes of one event-loop turn into one `acquire_many` (run/rate_batch.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

import pytest
from pydantic import BaseModel

from xjobs import JobContext, Rate, job
from xjobs.clock import ManualClock
from xjobs.contract.rates import RateBucket, RateVerdict
from xjobs.declare.rate import resolve_rate
from xjobs.memory.rates import MemoryRateStore
from xjobs.run.admit import RateGate
from xjobs.run.local_rates import LocalRates
from xjobs.run.rate_batch import GrantBatch

# 3 permits at once, then one every 100 ms
BUCKET = RateBucket(key="global:0", interval_ms=100.0, burst=3)


class RecordingRates:
    """The memory rate store, recording each `acquire_many` call that reaches it; `hold` keeps
    the calls waiting until it is set."""

    def __init__(self, clock: ManualClock) -> None:
        self.inner = MemoryRateStore(clock)
        self.calls: list[list[tuple[RateBucket, ...]]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.fail: Exception | None = None

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        return (await self.acquire_many([buckets]))[0]

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        self.calls.append([tuple(grant) for grant in grants])
        await self.hold.wait()
        if self.fail is not None:
            raise self.fail
        return await self.inner.acquire_many(grants)

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        return await self.inner.reserve(buckets, count, hold_ms)

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        await self.inner.abandon(buckets)

    async def spent(self, key: str, interval_ms: float) -> float:
        return await self.inner.spent(key, interval_ms)


def _gate() -> tuple[RateGate, RecordingRates]:
    clock = ManualClock()
    store = RecordingRates(clock)
    return RateGate(store, LocalRates(clock)), store


@pytest.mark.asyncio
async def test_the_takes_of_one_turn_reach_the_store_as_one_call_in_order() -> None:
    gate, store = _gate()
    other = RateBucket(key="queue:q:0", interval_ms=50.0, burst=10)
    asked = [(BUCKET,), (BUCKET, other), (BUCKET,), (other,), (BUCKET,)]
    waits = await asyncio.gather(*(gate.take(buckets) for buckets in asked))
    assert store.calls == [asked]
    # evaluated in the order asked: the fourth permit of BUCKET is 100 ms away
    assert waits == [0, 0, 0, 0, 100]


@pytest.mark.asyncio
async def test_takes_of_later_turns_are_later_calls() -> None:
    gate, store = _gate()
    first = await gate.take((BUCKET,))
    second = await asyncio.gather(gate.take((BUCKET,)), gate.take((BUCKET,)))
    assert (first, list(second)) == (0, [0, 0])
    assert [len(call) for call in store.calls] == [1, 2]


@pytest.mark.asyncio
async def test_the_local_fast_path_answers_without_joining_the_call() -> None:
    gate, store = _gate()
    await asyncio.gather(*(gate.take((BUCKET,)) for _ in range(3)))
    wait = await gate.take((BUCKET,))  # this process's own grants fill the bucket
    assert wait == 100
    assert len(store.calls) == 1


@pytest.mark.asyncio
async def test_a_failed_call_fails_every_take_of_its_batch() -> None:
    gate, store = _gate()
    store.fail = ConnectionError("the rate store is unreachable")
    taken = await asyncio.gather(gate.take((BUCKET,)), gate.take((BUCKET,)), return_exceptions=True)
    assert [type(outcome) for outcome in taken] == [ConnectionError, ConnectionError]
    assert await store.spent(BUCKET.key, BUCKET.interval_ms) == 0


@pytest.mark.asyncio
async def test_a_grant_whose_taker_was_cancelled_is_given_back() -> None:
    gate, store = _gate()
    store.hold.clear()
    kept = asyncio.ensure_future(gate.take((BUCKET,)))
    gone = asyncio.ensure_future(gate.take((BUCKET,)))
    for _ in range(3):  # both join the turn's batch, the flush sends it, the call starts
        await asyncio.sleep(0)
    assert len(store.calls) == 1
    gone.cancel()
    store.hold.set()
    assert await kept == 0
    with pytest.raises(asyncio.CancelledError):
        await gone
    for _ in range(100):  # the give-back runs after the answers are handed out
        await asyncio.sleep(0)
    assert await store.spent(BUCKET.key, BUCKET.interval_ms) == 1
    assert len(store.calls) == 1


@pytest.mark.asyncio
async def test_grants_asked_while_a_call_is_out_go_together_in_the_next() -> None:
    gate, store = _gate()
    store.hold.clear()
    first = asyncio.ensure_future(gate.take((BUCKET,)))
    for _ in range(3):  # the call of the first grant starts and waits
        await asyncio.sleep(0)
    later = asyncio.ensure_future(asyncio.gather(gate.take((BUCKET,)), gate.take((BUCKET,))))
    await asyncio.sleep(0)
    store.hold.set()
    assert (await first, list(await later)) == (0, [0, 0])
    assert [len(call) for call in store.calls] == [1, 2]


@pytest.mark.asyncio
async def test_a_batch_is_capped() -> None:
    clock = ManualClock()
    store = RecordingRates(clock)
    batch = GrantBatch(store, max_batch=2)
    verdicts = await asyncio.gather(*(batch.acquire((BUCKET,)) for _ in range(5)))
    assert [len(call) for call in store.calls] == [2, 2, 1]
    assert [v.granted for v in verdicts] == [True, True, True, False, False]


class Mail(BaseModel):
    org_id: str
    mail_id: str


async def send(ctx: JobContext, input: Mail) -> None:
    """A well-formed body."""


def test_the_buckets_follow_a_keyed_rate_and_are_kept_for_an_unkeyed_job() -> None:
    clock = ManualClock()
    every = resolve_rate(Rate(limit=100, per=timedelta(seconds=1)), what="global_rate")
    gate = RateGate(MemoryRateStore(clock), LocalRates(clock), shared=(every,))
    keyed = job(
        send,
        tenant=lambda i: i.org_id,
        idempotency_key=lambda i: i.mail_id,
        rate=Rate(limit=1, per=timedelta(seconds=1), key=lambda i: i.org_id),
        name="keyed",
    )
    plain = job(send, tenant=lambda i: i.org_id, idempotency_key=lambda i: i.mail_id, name="plain")
    acme, other = Mail(org_id="acme", mail_id="m-1"), Mail(org_id="other", mail_id="m-2")
    assert [b.key for b in gate.buckets(keyed, acme)] == ["job:keyed:0:acme", "global:0"]
    assert [b.key for b in gate.buckets(keyed, other)] == ["job:keyed:0:other", "global:0"]
    assert gate.buckets(plain, acme) is gate.buckets(plain, other)
    assert [b.key for b in gate.buckets(plain, other)] == ["global:0"]
