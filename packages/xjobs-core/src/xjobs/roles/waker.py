"""The claim loop's one timer: a wait that a kick ends early, and an `again` flag for a kick mid-pass."""

from __future__ import annotations

import asyncio


class Waker:
    """`wait(s)` sleeps up to `s` seconds (forever for `None`); `kick()` ends it, or marks `again`."""

    __slots__ = ("_again", "_future")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self._again = False

    def kick(self) -> None:
        """End the wait now, or make the next `wait` return at once when none is armed."""
        if self._future is not None and not self._future.done():
            self._future.set_result(None)
        else:
            self._again = True

    def take_again(self) -> bool:
        """Whether a kick arrived while no wait was armed (it is consumed)."""
        again, self._again = self._again, False
        return again

    async def wait(self, seconds: float | None) -> None:
        """Sleep up to `seconds` (forever for `None`), unless a kick ends it or already arrived.

        A kick that already arrived still yields one turn of the loop: a run started eagerly may
        kick within the pass, and the loop must never spin without letting others run.
        """
        if self.take_again():
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._future = future
        timer = None if seconds is None else loop.call_later(seconds, _resolve, future)
        try:
            await future
        finally:
            self._future = None
            if timer is not None:
                timer.cancel()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
