"""The `rate` throttle: batches per second as an interval, and the cancellable wait a batch spends inside its step."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from xjobs.factories.backfill_errors import BackfillInvalidError
from xjobs.options import finite_option

MAX_RATE = 10_000.0


def rate_interval_s(rate: float | None) -> float:
    """The seconds between two batches' starts for `rate` batches/s (`None`: no throttle, 0)."""
    if rate is None:
        return 0.0
    if isinstance(rate, bool):
        raise BackfillInvalidError(f"backfill rate must be batches per second, got {rate!r}")
    value = finite_option("backfill rate", rate, maximum=MAX_RATE)
    if value <= 0:
        raise BackfillInvalidError(
            f"backfill rate must be above 0 batches per second, got {rate!r}"
        )
    return 1.0 / value


class Throttle:
    """One pass's pacing: `wait()` sleeps until `interval` after the previous batch started.

    Spent INSIDE the batch's step, so a replayed batch (its step recorded) waits for nothing.
    The wait polls `cancelled` and ends early when the run is aborted.
    """

    def __init__(self, interval_s: float, cancelled: Callable[[], bool]) -> None:
        self._interval = interval_s
        self._cancelled = cancelled
        self._last: float | None = None

    async def wait(self) -> None:
        """Wait out the rest of the interval since the previous batch, then mark this one's start."""
        if self._interval > 0 and self._last is not None:
            due = self._last + self._interval
            while not self._cancelled():
                left = due - time.monotonic()
                if left <= 0:
                    break
                await asyncio.sleep(min(left, 0.05))
        self._last = time.monotonic()
