"""A rate bucket is one row of the file: the acquirers of every connection share its burst."""

from __future__ import annotations

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.rates import RateBucket
from xjobs_sqlite.backend import open_backend


@pytest.mark.asyncio
async def test_two_connections_together_take_no_more_than_the_burst(db_url: str) -> None:
    clock = ManualClock()
    first = await open_backend(db_url, clock=clock)
    second = await open_backend(db_url, clock=clock)
    bucket = RateBucket("send-mail", interval_ms=3_600_000, burst=5)
    try:
        assert first.rates is not None
        assert second.rates is not None
        verdicts = [await store.acquire([bucket]) for store in (first.rates, second.rates) * 5]
        assert sum(v.granted for v in verdicts) == 5
    finally:
        await second.close()
        await first.close()
