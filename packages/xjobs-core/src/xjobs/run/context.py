"""`JobContext`: what a running body knows about its run, and the calls it may make."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xjobs.errors import StepInSyncBodyError
from xjobs.options import finite_option

if TYPE_CHECKING:
    from xjobs.run.progress import ProgressThrottle
    from xjobs.run.signal import RunSignal
    from xjobs.run.steps import StepApi


@dataclass(eq=False)
class RunIdentity:
    """What every body knows of its run: ids, name, queue, attempts, the tenant it acts for, and
    who enqueued it (attribution, never authority)."""

    job_id: str
    run_id: str
    name: str
    queue: str
    attempt: int
    max_attempts: int
    final_attempt: bool
    tenant: str | None
    enqueued_by: str | None
    traceparent: str | None


@dataclass(eq=False)
class JobContext(RunIdentity):
    """The run's identity (`job_id`, `run_id`, `attempt`, …), its durable `step`s and its `progress()` reporter."""

    step: StepApi = field(repr=False)
    _progress: ProgressThrottle = field(repr=False)
    _signal: RunSignal = field(repr=False)

    async def progress(self, value: float) -> None:
        """Report how far the run is, from 0.0 to 1.0 (throttled; the last value is always written)."""
        await self._progress.report(value)

    @property
    def cancelled(self) -> bool:
        """Whether the worker has aborted this run (lease lost, cancelled, deadline, drain)."""
        return self._signal.aborted


@dataclass(eq=False)
class SyncJobContext(RunIdentity):
    """What a plain `def` body sees, from its thread: the run's identity, a `progress()` it may call
    and a `cancelled` flag it may poll. Durable steps need an `async def` body."""

    _progress: ProgressThrottle = field(repr=False)
    _signal: RunSignal = field(repr=False)
    _loop: asyncio.AbstractEventLoop = field(repr=False)

    def progress(self, value: float) -> None:
        """Report how far the run is, from 0.0 to 1.0 (handed to the worker's loop, throttled;
        the last value is always written before the settle)."""
        checked = finite_option("progress", value, minimum=0.0, maximum=1.0)
        asyncio.run_coroutine_threadsafe(self._progress.report(checked), self._loop)

    @property
    def cancelled(self) -> bool:
        """Whether the worker gave up on this run (lease lost, cancelled, deadline, drain): a
        thread cannot be stopped, so a long body should poll this and return."""
        return self._signal.aborted

    @property
    def step(self) -> None:
        """Refused: durable steps (`ctx.step`) need an `async def` body."""
        raise StepInSyncBodyError(
            f"job {self.name!r} has a plain `def` body: durable steps (ctx.step) need `async def`"
        )
