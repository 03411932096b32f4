"""Plain `def` bodies: each runs on a daemon thread of its own, at most `capacity` at once per worker.

The event loop stays free meanwhile (heartbeats go on). A thread cannot be cancelled: an aborted
run stops waiting for it and the thread is abandoned — it polls `ctx.cancelled` if it cares, and
being a daemon it never holds the process at exit. Its capacity slot comes back only when the
thread really ends, so abandoned threads still count against the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any


class BodyThreads:
    """The threads of one worker's plain `def` bodies."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._slots: asyncio.Semaphore | None = None
        self.abandoned = 0

    async def run(self, fn: Callable[..., object], *args: Any) -> object:
        """`fn(*args)` on a daemon thread in the caller's context; cancelling abandons the thread."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.capacity)
        slots = self._slots
        await slots.acquire()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[object] = loop.create_future()
        context = contextvars.copy_context()

        def body() -> None:
            result: object = None
            error: BaseException | None = None
            try:
                result = context.run(fn, *args)
            except BaseException as exc:  # handed to the run, which reads it like an async body's
                error = exc
            # The loop may be gone: the run was abandoned and the process is exiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_finish, answer, slots, result, error)

        threading.Thread(target=body, name=f"xjobs-body-{id(answer):x}", daemon=True).start()
        try:
            return await answer
        except asyncio.CancelledError:
            if not answer.done():
                self.abandoned += 1
            raise


def _finish(
    answer: asyncio.Future[object],
    slots: asyncio.Semaphore,
    result: object,
    error: BaseException | None,
) -> None:
    slots.release()
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)
