"""The memory scheduler state and leader: watermarks, fires and pauses in one process, each call atomic."""

from __future__ import annotations

from collections.abc import Sequence

from xjobs.clock import Clock
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import TaskFire
from xjobs.memory.driver import MemoryJobDriver


class MemorySchedulerState:
    """Watermarks, last fires and pauses by task name; a fire enqueues through the memory driver."""

    def __init__(self, clock: Clock, jobs: MemoryJobDriver) -> None:
        self._clock = clock
        self._jobs = jobs
        self._watermarks: dict[str, int] = {}
        self._fires: dict[str, TaskFire] = {}
        self._paused: set[str] = set()

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        return {t: self._watermarks[t] for t in tasks if t in self._watermarks}

    def _move(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        if self._watermarks.get(task) != previous_ms:
            return False
        self._watermarks[task] = watermark_ms
        return True

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        return self._move(task, previous_ms, watermark_ms)

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        if not self._move(task, previous_ms, occurrence_ms):
            return False
        # The memory enqueue never suspends before it writes, so the move and the row are atomic.
        (result,) = await self._jobs.enqueue([job])
        self._fires[task] = TaskFire(task, occurrence_ms, result.job_id, self._clock.now_ms())
        return True

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        names = self._fires.keys() if tasks is None else tasks
        return {t: self._fires[t] for t in names if t in self._fires}

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        return {t for t in tasks if t in self._paused}

    async def pause(self, task: str) -> bool:
        was_running = task not in self._paused
        self._paused.add(task)
        return was_running

    async def resume(self, task: str) -> bool:
        was_paused = task in self._paused
        self._paused.discard(task)
        return was_paused


class MemoryLeader:
    """One holder with an expiry on the injected clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._holder: str | None = None
        self._expires_ms = 0

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        now = self._clock.now_ms()
        if self._holder not in (None, candidate) and self._expires_ms > now:
            return False
        self._holder = candidate
        self._expires_ms = now + ttl_ms
        return True

    async def release(self, candidate: str) -> None:
        if self._holder == candidate:
            self._holder = None
            self._expires_ms = 0
