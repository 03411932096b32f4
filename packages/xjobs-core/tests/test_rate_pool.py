"""An unkeyed grant starts on permits this process holds ahead, reserved in one store call (run/rate_pool.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.rates import RateBucket, RateVerdict
from xjobs.memory.rates import MemoryRateStore
from xjobs.run.admit import RateGate
from xjobs.run.local_rates import LocalRates
from xjobs.run.rate_pool import ASK_MIN, COLD_MS, HOLD_MS, most_ahead

# a limit far above what one process achieves: 1,000,000 a second
ROOMY = (RateBucket(key="global:0", interval_ms=0.001, burst=1_000_000),)
# 5 a second, burst 5: half the burst (500 ms) cannot hold the hold (200 ms) and 8 permits
TIGHT = (RateBucket(key="job:tight:0", interval_ms=200.0, burst=5),)


class CountedRates:
    """The memory rate store over a round trip (not in-process), counting what reaches it."""

    def __init__(self, clock: ManualClock) -> None:
        self.inner = MemoryRateStore(clock)
        self.reserved: list[int] = []
        self.acquired = 0
        self.fail: Exception | None = None

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        return (await self.acquire_many([buckets]))[0]

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        self.acquired += len(grants)
        return await self.inner.acquire_many(grants)

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        self.reserved.append(count)
        await asyncio.sleep(0)  # an answer comes back on a later turn, as over a connection
        if self.fail is not None:
            raise self.fail
        return await self.inner.reserve(buckets, count, hold_ms)

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        await self.inner.abandon(buckets)

    async def spent(self, key: str, interval_ms: float) -> float:
        return await self.inner.spent(key, interval_ms)


def _gate() -> tuple[RateGate, CountedRates, ManualClock]:
    clock = ManualClock()
    store = CountedRates(clock)
    return RateGate(store, LocalRates(clock)), store, clock


async def _takes(gate: RateGate, n: int, grant: tuple[RateBucket, ...] = ROOMY) -> list[int]:
    return [await gate.take(grant, ahead=True) for _ in range(n)]


@pytest.mark.asyncio
async def test_runs_start_on_held_permits_with_one_store_call_per_allotment() -> None:
    gate, store, _ = _gate()
    assert await _takes(gate, ASK_MIN) == [0] * ASK_MIN
    assert (store.reserved, store.acquired) == ([ASK_MIN], 0)
    assert (store.reserved, store.acquired) == ([ASK_MIN], 0)
    for _ in range(3):  # the next allotment, asked in the background at half, lands
        await asyncio.sleep(0)
    assert store.reserved == [ASK_MIN, ASK_MIN]
    assert await store.spent(ROOMY[0].key, ROOMY[0].interval_ms) == pytest.approx(
        (HOLD_MS + 0.001 * 2 * ASK_MIN) / 0.001
    )
    # the first allotment used up within its hold: the ask after the second is twice as large
    assert await _takes(gate, ASK_MIN) == [0] * ASK_MIN
    for _ in range(3):
        await asyncio.sleep(0)
    assert store.reserved == [ASK_MIN, ASK_MIN, 2 * ASK_MIN]


@pytest.mark.asyncio
async def test_a_permit_past_its_hold_is_dropped_and_a_lapsed_allotment_halves_the_ask() -> None:
    gate, store, clock = _gate()
    await _takes(gate, ASK_MIN + 1)  # the second allotment, of 2 * ASK_MIN, one used
    clock.advance(HOLD_MS)
    assert await _takes(gate, 1) == [0]
    assert store.reserved == [ASK_MIN, 2 * ASK_MIN, ASK_MIN]


@pytest.mark.asyncio
async def test_the_first_reservation_covers_every_run_waiting_on_it() -> None:
    gate, store, _ = _gate()
    waits = await asyncio.gather(*(gate.take(ROOMY, ahead=True) for _ in range(ASK_MIN + 2)))
    assert list(waits) == [0] * (ASK_MIN + 2)
    assert (store.reserved[0], store.acquired) == (ASK_MIN + 2, 0)


@pytest.mark.asyncio
async def test_the_next_allotment_is_reserved_in_the_background_once_half_is_spent() -> None:
    gate, store, _ = _gate()
    assert await _takes(gate, ASK_MIN // 2 - 1) == [0] * (ASK_MIN // 2 - 1)
    await asyncio.sleep(0)
    assert store.reserved == [ASK_MIN]  # the first, waited on; under half spent, no other
    assert await _takes(gate, 1) == [0]  # half spent: the next is asked, not waited on
    await asyncio.sleep(0)
    assert store.reserved == [ASK_MIN, ASK_MIN]
    for _ in range(3):  # its answer lands
        await asyncio.sleep(0)
    rest = 2 * ASK_MIN - ASK_MIN // 2
    assert await _takes(gate, rest) == [0] * rest  # both allotments, no take waiting
    await asyncio.sleep(0)
    assert (len(store.reserved), store.acquired) == (3, 0)  # the third asked in the background


@pytest.mark.asyncio
async def test_a_limit_too_near_to_hold_ahead_is_never_reserved() -> None:
    gate, store, _ = _gate()
    assert most_ahead(TIGHT, HOLD_MS) == 0
    assert await _takes(gate, 6, TIGHT) == [0] * 5 + [200]
    assert (store.reserved, store.acquired) == ([], 5)  # the sixth refused by the local mirror


@pytest.mark.asyncio
async def test_a_refused_reservation_asks_per_run_until_it_has_cooled() -> None:
    gate, store, clock = _gate()
    # 1,000 a second, burst 1,000: half the burst is 500 ms, the hold 200 + 8 permits fits...
    roomy = (RateBucket(key="queue:q:0", interval_ms=1.0, burst=1_000),)
    # ... until other processes have spent 495 of it
    await store.inner.acquire_many([roomy] * 495)
    assert await _takes(gate, 3, roomy) == [0, 0, 0]
    assert (store.reserved, store.acquired) == ([ASK_MIN], 3)
    clock.advance(COLD_MS)  # the bucket has refilled: the next take reserves again
    assert await _takes(gate, 2, roomy) == [0, 0]
    assert (store.reserved, store.acquired) == ([ASK_MIN, ASK_MIN], 3)


@pytest.mark.asyncio
async def test_a_failed_reservation_fails_its_takes_and_the_next_take_asks_again() -> None:
    gate, store, _ = _gate()
    store.fail = ConnectionError("the rate store is unreachable")
    taken = await asyncio.gather(
        gate.take(ROOMY, ahead=True), gate.take(ROOMY, ahead=True), return_exceptions=True
    )
    assert [type(outcome) for outcome in taken] == [ConnectionError, ConnectionError]
    store.fail = None
    assert await _takes(gate, 1) == [0]
    assert store.reserved == [ASK_MIN, ASK_MIN]


@pytest.mark.asyncio
async def test_a_take_without_ahead_never_reserves() -> None:
    gate, store, _ = _gate()
    assert [await gate.take(ROOMY) for _ in range(3)] == [0, 0, 0]
    assert (store.reserved, store.acquired) == ([], 3)


def test_the_largest_allotment_is_what_half_the_burst_holds_after_the_hold() -> None:
    thousand = (RateBucket(key="k", interval_ms=1.0, burst=1_000),)
    assert most_ahead(thousand, HOLD_MS) == 300
    assert most_ahead(ROOMY, HOLD_MS) == 1024


@pytest.mark.asyncio
async def test_closing_waits_out_a_reservation_in_flight_and_drops_the_held_permits() -> None:
    gate, store, _ = _gate()
    await _takes(gate, ASK_MIN // 2)  # half spent: the next allotment is asked in the background
    await gate.close()
    assert store.reserved == [ASK_MIN, ASK_MIN]
    assert await _takes(gate, 1) == [0]  # nothing held any more: a new allotment, waited on
    assert store.reserved == [ASK_MIN, ASK_MIN, ASK_MIN]
