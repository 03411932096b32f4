"""The Postgres rate store under concurrent acquirers: grants serialise on the bucket rows, none is lost or doubled."""

from __future__ import annotations

import asyncio

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.rates import RateBucket
from xjobs_pg.testing import opened

HOUR_MS = 3_600_000.0
# two buckets that refill nothing while the test runs (the clock stands still)
ONE = RateBucket(key="job:j:0", interval_ms=HOUR_MS, burst=20)
TWO = RateBucket(key="global:0", interval_ms=HOUR_MS, burst=12)
GRANTS = [[ONE], [ONE, TWO], [TWO]]


@pytest.mark.asyncio
async def test_concurrent_batches_of_two_workers_take_each_permit_once(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock=clock) as first, opened(schema, clock=clock) as second:
        stores = [store for store in (first.rates, second.rates) if store is not None]
        calls = [store.acquire_many(GRANTS) for store in stores for _ in range(8)]
        batches = await asyncio.gather(*calls)
        taken = {ONE.key: 0, TWO.key: 0}
        for verdicts in batches:
            for grant, verdict in zip(GRANTS, verdicts, strict=True):
                for bucket in grant if verdict.granted else []:
                    taken[bucket.key] += 1
        spent = {b.key: await stores[0].spent(b.key, b.interval_ms) for b in (ONE, TWO)}
    assert len(stores) == 2
    # far more asked than there are permits: every permit is taken, each by one grant only
    assert taken == {ONE.key: ONE.burst, TWO.key: TWO.burst}
    assert spent == {ONE.key: ONE.burst, TWO.key: TWO.burst}


@pytest.mark.asyncio
async def test_abandons_beside_acquires_give_back_what_they_took(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock=clock) as backend:
        rates = backend.rates
        assert rates is not None
        await rates.acquire_many([[ONE, TWO]] * 6)

        async def churn() -> None:
            """Take a grant of both buckets, in the other order, and hand it back."""
            (verdict,) = await rates.acquire_many([[TWO, ONE]])
            if verdict.granted:
                await rates.abandon([TWO, ONE])

        await asyncio.gather(*(churn() for _ in range(12)), rates.abandon([ONE, TWO]))
        spent = [await rates.spent(b.key, b.interval_ms) for b in (ONE, TWO)]
    assert spent == [5, 5]
