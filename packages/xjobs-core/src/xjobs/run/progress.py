"""The progress throttle: at most one write per interval while a run reports, flushed before every settle."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from xjobs.clock import Clock
from xjobs.options import finite_option

PROGRESS_THROTTLE_MS = 1000


class ProgressThrottle:
    """Keeps the latest reported progress and writes it when the interval allows, or on `flush()`."""

    __slots__ = ("_clock", "_last_write_ms", "_pending", "_write", "_writing")

    def __init__(self, clock: Clock, write: Callable[[float], Awaitable[bool]]) -> None:
        self._clock = clock
        self._write = write
        self._pending: float | None = None
        self._last_write_ms: int | None = None
        # One write at a time: a flush waits for the write in flight, so an older value can never
        # land after a newer one (reports from a thread race the settle's flush). Made by the
        # first report: a run that reports nothing costs no lock.
        self._writing: asyncio.Lock | None = None

    async def report(self, value: float) -> None:
        """Record `value` (0.0 to 1.0); write it now unless a write landed within the interval."""
        progress = finite_option("progress", value, minimum=0.0, maximum=1.0)
        self._pending = progress
        now = self._clock.now_ms()
        if self._last_write_ms is None or now - self._last_write_ms >= PROGRESS_THROTTLE_MS:
            await self.flush()

    async def flush(self) -> None:
        """Write the pending value, if any (called before every settle)."""
        if self._writing is None:
            if self._pending is None:
                return  # nothing was ever reported: nothing to write, nothing in flight
            self._writing = asyncio.Lock()
        async with self._writing:
            if self._pending is None:
                return
            value, self._pending = self._pending, None
            self._last_write_ms = self._clock.now_ms()
            await self._write(value)
