"""Rate permits held ahead by this process: allotments reserved in one store call each, started without one.

Only a grant whose every bucket is unkeyed (a job's, a queue's or the global rate) is held ahead:
its one bucket tuple serves every run. A held permit is started within the hold (`HOLD_MS`, on
the gate's clock and the monotonic one) of asking, or dropped: the store placed it after the
hold, so any start during it is one GCRA admits (`RateStore.reserve`). The next allotment is
asked in the background once half of the held permits are spent, so a steady stream of runs never
waits on the store. An allotment used up within its hold doubles the next ask; one that lapses
more than half unused halves it; the first covers every run waiting on it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from xjobs.contract.rates import RateBucket, RateStore, reserve_ceiling_ms

if TYPE_CHECKING:
    from xjobs.run.local_rates import LocalRates

log = logging.getLogger("xjobs.run.rate_pool")

HOLD_MS: Final = 200
ASK_MIN: Final = 8
ASK_MAX: Final = 1024
# after a refused reservation, the grant is asked per run this long before it is reserved again
COLD_MS: Final = 1000

Grant = tuple[RateBucket, ...]


@dataclass(slots=True)
class Allotment:
    """Permits of one grant reserved together: how many are left, and until when they may start."""

    size: int
    left: int
    until_ms: float
    until_mono: float


def most_ahead(buckets: Sequence[RateBucket], hold_ms: int) -> int:
    """The largest allotment a reservation of `buckets` could be granted (0: never one of ASK_MIN)."""
    most = min(math.floor((reserve_ceiling_ms(b) - hold_ms) / b.interval_ms) for b in buckets)
    return min(most, ASK_MAX) if most >= ASK_MIN else 0


class PermitPool:
    """Allotments per grant, oldest first; one reservation in flight per grant, shared by every
    run waiting on it."""

    def __init__(self, store: RateStore, local: LocalRates, hold_ms: int = HOLD_MS) -> None:
        self._store = store
        self._local = local
        self._clock = local.clock  # the gate's clock, which the local mirror reads too
        self._hold_ms = hold_ms
        self._held: dict[Grant, deque[Allotment]] = {}
        self._size: dict[Grant, int] = {}
        self._most: dict[Grant, int] = {}
        self._cold: dict[Grant, float] = {}
        self._waiting: dict[Grant, int] = {}
        self._filling: dict[Grant, asyncio.Future[None]] = {}

    def take(self, grant: Grant) -> bool:
        """Start on a held permit of `grant`, with no store call: False when none is left in hold.
        Half of the last allotment spent, the next is asked in the background."""
        held = self._held.get(grant)
        if not held:
            return False
        now_ms, now_mono = self._clock.now_ms(), time.monotonic()
        while held:
            first = held[0]
            if first.left and now_ms < first.until_ms and now_mono < first.until_mono:
                first.left -= 1
                if len(held) == 1 and first.left * 2 <= first.size and grant not in self._filling:
                    self._fill(grant)
                return True
            held.popleft()
            self._retired(grant, first)
        return False

    async def refill(self, grant: Grant) -> bool:
        """Reserve an allotment of `grant` and start on one of its permits; False when the grant
        cannot be held ahead (its limit is too near what the fleet takes), or every permit of the
        allotment went to the runs waiting before this one: ask the store per run."""
        most = self._most.get(grant)
        if most is None:
            most = self._most[grant] = most_ahead(grant, self._hold_ms)
        if not most or self._clock.now_ms() < self._cold.get(grant, -math.inf):
            return False
        filling = self._filling.get(grant) or self._fill(grant)
        self._waiting[grant] = self._waiting.get(grant, 0) + 1
        try:
            await asyncio.shield(filling)
        finally:
            self._waiting[grant] -= 1
        return self.take(grant)

    async def close(self) -> None:
        """Wait out the reservations still in flight (a worker closing leaves no task behind);
        the permits they and the held allotments hold are dropped."""
        if self._filling:
            await asyncio.gather(*self._filling.values(), return_exceptions=True)
        self._held.clear()

    def _fill(self, grant: Grant) -> asyncio.Future[None]:
        filling = self._filling[grant] = asyncio.ensure_future(self._reserve(grant))
        filling.add_done_callback(_reported)
        return filling

    async def _reserve(self, grant: Grant) -> None:
        # runs a turn after it is asked: every run of that turn is waiting by now
        size = min(
            max(self._size.get(grant, ASK_MIN), self._waiting.get(grant, 0)), self._most[grant]
        )
        asked_ms, asked_mono = self._clock.now_ms(), time.monotonic()
        try:
            taken = await self._store.reserve(grant, size, self._hold_ms)
        finally:
            del self._filling[grant]
        if not taken:
            self._cold[grant] = self._clock.now_ms() + COLD_MS
            return
        self._size[grant] = size
        self._local.took(grant, size)
        until_ms, until_mono = asked_ms + self._hold_ms, asked_mono + self._hold_ms / 1000
        self._held.setdefault(grant, deque()).append(Allotment(size, size, until_ms, until_mono))

    def _retired(self, grant: Grant, allotment: Allotment) -> None:
        """An allotment used up or lapsed sizes the next ask."""
        if allotment.left == 0:
            self._size[grant] = min(allotment.size * 2, self._most[grant])
        elif allotment.left > allotment.size // 2:
            self._size[grant] = max(allotment.size // 2, ASK_MIN)


def _reported(done: asyncio.Future[None]) -> None:
    """A failed reservation is logged here, whether or not a run was waiting on it."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("jobs.worker.rate-reserve-failed", exc_info=done.exception())
