"""The Redis rate store: a GCRA HASH per bucket key (its TAT and line), every bucket under one hash tag."""

from __future__ import annotations

from collections.abc import Sequence

from xjobs.contract.rates import RateBucket, RateVerdict
from xjobs_redis.calls import rates
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys


class RedisRateStore:
    """Each operation is one script; the keys share one slot, so several buckets (and several grants) go at once."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._keys = keys

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        return (await self.acquire_many([buckets]))[0]

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        """One script for every grant, in turn, at one instant (none when no grant names a bucket)."""
        if not any(grants):
            return [RateVerdict(True) for _ in grants]
        call = rates.rate_acquire(self._keys, now=self._x.now(), grants=grants)
        waits = await self._x.run(call)
        return [RateVerdict(True) if int(w) <= 0 else RateVerdict(False, int(w)) for w in waits]

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        if not buckets:
            return True
        call = rates.rate_reserve(
            self._keys, now=self._x.now(), buckets=buckets, count=count, hold_ms=hold_ms
        )
        return int(await self._x.run(call)) == 1

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        if buckets:
            await self._x.run(rates.rate_abandon(self._keys, now=self._x.now(), buckets=buckets))

    async def spent(self, key: str, interval_ms: float) -> float:
        ahead = await self._x.run(rates.rate_spent(self._keys, now=self._x.now(), key=key))
        return float(ahead) / interval_ms
