"""`LocalRates`: this process's own rate grants per bucket, so a run its own grants alone hold
over a rate is deferred with no round trip to the store."""

from __future__ import annotations

import math
from collections.abc import Sequence

from xjobs.clock import Clock
from xjobs.contract.rates import RateBucket

# The local mirror forgets the buckets whose TAT has passed once it holds this many keys.
LOCAL_PRUNE_AT = 4096


class LocalRates:
    """This process's own grants per bucket, as a TAT of its own on its own clock.

    The fleet's TAT of a bucket is never earlier than the one this process's grants alone make,
    so when they alone use the bucket up the run is deferred with no round trip to the store.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._tat: dict[str, float] = {}
        self._line: dict[str, float] = {}

    def wait_ms(self, buckets: Sequence[RateBucket]) -> int:
        """How long this process's own grants alone hold the buckets full (0: ask the store); runs
        refused here one after another are lined up an interval apart, as the store lines them."""
        now = self.clock.now_ms()
        free = {b.key: self._tat.get(b.key, now) - (b.burst - 1) * b.interval_ms for b in buckets}
        full = [b for b in buckets if free[b.key] > now]
        if not full:
            return 0
        due = max(max(free[b.key], self._line.get(b.key, 0.0)) for b in full)
        for b in full:
            self._line[b.key] = max(self._line.get(b.key, 0.0), due + b.interval_ms)
        return max(math.ceil(due - now), 1)

    def took(self, buckets: Sequence[RateBucket], count: int = 1) -> None:
        """The store granted `count` permits of each bucket to this process."""
        now = self.clock.now_ms()
        if len(self._tat) >= LOCAL_PRUNE_AT:
            self._tat = {k: t for k, t in self._tat.items() if t > now}
            self._line = {k: t for k, t in self._line.items() if t > now}
        for b in buckets:
            self._tat[b.key] = max(self._tat.get(b.key, now), now) + count * b.interval_ms

    def gave_back(self, buckets: Sequence[RateBucket]) -> None:
        """A grant of this process was abandoned: its permits are free again."""
        for b in buckets:
            if b.key in self._tat:
                self._tat[b.key] -= b.interval_ms
