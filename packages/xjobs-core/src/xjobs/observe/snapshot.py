"""`BackendSnapshot`: the backend-wide gauges as last read from the operator surface, and the loop that reads them.

One process reads them (the scheduler leader, or one told to), at most once per interval, so
N workers scraped every few seconds never multiply the database's load.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from xjobs.clock import Clock
    from xjobs.contract.backend import Backend
    from xjobs.operate.operator import Operator

log = logging.getLogger("xjobs.observe.snapshot")

REFRESH_EVERY_S: Final = 15.0


@dataclass(frozen=True, slots=True)
class QueueGauge:
    """One queue's gauges: due jobs, the oldest due job's wait, dead jobs."""

    queue: str
    ready: int
    oldest_ready_s: float
    dead: int


@dataclass(frozen=True, slots=True)
class BackendView:
    """Every queue's gauges and the live workers, as read at one instant."""

    queues: tuple[QueueGauge, ...]
    workers_alive: int | None


ReadView = Callable[[], Awaitable[BackendView]]


class BackendSnapshot:
    """The last view read (or none while this process does not serve it), and its refresh task."""

    def __init__(self) -> None:
        self._view: BackendView | None = None
        self._lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None

    def current(self) -> BackendView | None:
        """The last view, or `None` while this process serves none."""
        with self._lock:
            return self._view

    def set(self, view: BackendView | None) -> None:
        """Replace the view (`None`: serve none)."""
        with self._lock:
            self._view = view

    @property
    def serving(self) -> bool:
        """Whether the refresh task runs."""
        return self._task is not None and not self._task.done()

    def serve(self, read: ReadView, every_s: float = REFRESH_EVERY_S) -> None:
        """Start reading the view every `every_s` in the running loop (once)."""
        if not self.serving:
            self._task = asyncio.ensure_future(self._refresh(read, every_s))

    def stop(self) -> None:
        """Stop reading and forget the view (another process serves it now)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self.set(None)

    async def aclose(self) -> None:
        """Stop, and wait for the refresh task to end."""
        task = self._task
        self.stop()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def _refresh(self, read: ReadView, every_s: float) -> None:
        failing = False
        while True:
            try:
                self.set(await read())
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception:
                if not failing:
                    log.warning("jobs.telemetry.snapshot-failed", exc_info=True)
                failing = True
            await asyncio.sleep(every_s)


async def read_view(operator: Operator, backend: Backend, clock: Clock) -> BackendView:
    """One read of the operator surface (every queue's bounded counts) and of the worker registry."""
    now_ms = clock.now_ms()
    queues = tuple(
        QueueGauge(
            q.queue,
            q.ready,
            0.0 if q.oldest_ready_ms is None else max(now_ms - q.oldest_ready_ms, 0) / 1000,
            q.dead,
        )
        for q in await operator.queues()
    )
    workers = None if backend.workers is None else len(await backend.workers.list())
    return BackendView(queues, workers)
