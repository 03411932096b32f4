"""One event loop per process, on a daemon thread, that every sync or async Django caller hands
xjobs calls to: xjobs' connections live on one loop, Django's callers live on many threads."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# How long the process's exit waits for the portal's closers (open xjobs connections).
CLOSE_WITHIN_S = 5.0


class Portal:
    """An event loop on a daemon thread: `run` a coroutine from a sync caller, `arun` from an async one."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self._closers: list[Callable[[], Awaitable[None]]] = []
        # What callers share on this loop (its open connections), by their own keys.
        self.shared: dict[object, Any] = {}
        started = threading.Event()
        self.thread = threading.Thread(
            target=self._serve, args=(started,), name="xjobs-django-portal", daemon=True
        )
        self.thread.start()
        started.wait()

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the portal's loop; answers its future."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a portal call from the portal's own loop would wait for itself")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the portal's loop and wait for its answer (a sync caller's thread blocks)."""
        return self.submit(coro).result()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the portal's loop and await its answer from the caller's own loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Await `closer` on the portal's loop when the portal closes (at the process's exit)."""
        self._closers.append(closer)

    def close(self) -> None:
        """Run the closers (bounded by CLOSE_WITHIN_S), then stop and close the loop."""
        closers, self._closers = self._closers, []

        async def close_all() -> None:
            await asyncio.gather(*(closer() for closer in closers), return_exceptions=True)

        if self.thread.is_alive():
            future = asyncio.run_coroutine_threadsafe(close_all(), self.loop)
            try:
                future.result(timeout=CLOSE_WITHIN_S)
            except (concurrent.futures.TimeoutError, RuntimeError):
                future.cancel()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=CLOSE_WITHIN_S)
        if not self.thread.is_alive():
            self.loop.close()


_lock = threading.Lock()
_portal: Portal | None = None


def portal() -> Portal:
    """This process's portal, started on first use (and again in a forked child, whose copy of the
    parent's thread does not run)."""
    global _portal
    with _lock:
        if _portal is None or _portal.pid != os.getpid():
            _portal = Portal()
        return _portal


def close_portal() -> None:
    """Close this process's portal and what was opened on it; the next call starts a new one."""
    global _portal
    with _lock:
        found, _portal = _portal, None
    if found is not None and found.pid == os.getpid():
        found.close()


atexit.register(close_portal)
