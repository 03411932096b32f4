"""`JobContext`: what a running body knows about its run, and the calls it may make."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xjobs.run.progress import ProgressThrottle
    from xjobs.run.signal import RunSignal
    from xjobs.run.steps import StepApi


@dataclass(eq=False)
class JobContext:
    """The run's identity (`job_id`, `run_id`, `attempt`, …), its durable `step`s and its `progress()` reporter."""

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
