"""The memory rate store: one GCRA theoretical arrival time (and deferral line) per bucket key, on the injected clock."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from xjobs.clock import Clock
from xjobs.contract.rates import RateBucket, RateVerdict, reserve_ceiling_ms

PRUNE_AT = 1024  # the lines are swept of passed ones once they number this many
GRANTED: Final = RateVerdict(True)


class MemoryRateStore:
    """TATs and lines per key; a TAT or a line that has passed is dropped (an idle bucket is a full one)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tat: dict[str, float] = {}
        self._line: dict[str, float] = {}

    def _tat_of(self, key: str, now: float) -> float:
        tat = self._tat.get(key, now)
        if tat <= now:
            self._tat.pop(key, None)
            return now
        return tat

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        return self.grant_now(buckets)

    def grant_now(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        """In process (`InProcessRates`): a worker takes its permits synchronously."""
        return self._grant(buckets, float(self._clock.now_ms()))

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        now = float(self._clock.now_ms())
        return [self._grant(buckets, now) for buckets in grants]

    def _grant(self, buckets: Sequence[RateBucket], now: float) -> RateVerdict:
        """Take one permit of every bucket at `now`, or none (each full bucket's line moves on)."""
        if len(buckets) == 1:  # the common case, without the maps
            one = buckets[0]
            tat = self._tat_of(one.key, now)
            if tat - (one.burst - 1) * one.interval_ms <= now:
                self._tat[one.key] = tat + one.interval_ms
                return GRANTED
        free = {b.key: self._tat_of(b.key, now) - (b.burst - 1) * b.interval_ms for b in buckets}
        full = [b for b in buckets if free[b.key] > now]
        if not full:
            for b in buckets:
                self._tat[b.key] = self._tat_of(b.key, now) + b.interval_ms
            return GRANTED
        due = max(max(free[b.key], self._line.get(b.key, 0.0)) for b in full)
        for b in full:
            self._line[b.key] = max(self._line.get(b.key, 0.0), due + b.interval_ms)
        if len(self._line) > PRUNE_AT:
            self._line = {k: line for k, line in self._line.items() if line > now}
        return RateVerdict(False, max(math.ceil(due - now), 1))

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        now = float(self._clock.now_ms())
        start = now + hold_ms
        tats = {
            b.key: max(self._tat_of(b.key, now), start) + count * b.interval_ms for b in buckets
        }
        if any(tats[b.key] - now > reserve_ceiling_ms(b) for b in buckets):
            return False
        self._tat.update(tats)
        return True

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        now = float(self._clock.now_ms())
        for b in buckets:
            tat = self._tat_of(b.key, now) - b.interval_ms
            if tat > now:
                self._tat[b.key] = tat
            else:
                self._tat.pop(b.key, None)

    async def spent(self, key: str, interval_ms: float) -> float:
        now = float(self._clock.now_ms())
        return (self._tat_of(key, now) - now) / interval_ms
