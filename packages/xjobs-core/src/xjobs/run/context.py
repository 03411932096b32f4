"""`JobContext`: what a running body knows about its run, and the calls it may make."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from xjobs.contract.observer import NOOP, Observer
from xjobs.errors import StepInSyncBodyError
from xjobs.options import finite_option
from xjobs.run.children import ChildSteps
from xjobs.run.progress import ProgressThrottle
from xjobs.run.steps import StepRun

if TYPE_CHECKING:
    from xjobs.clock import Clock
    from xjobs.contract.children import ChildStore
    from xjobs.contract.driver import Claim, ClaimedJob
    from xjobs.contract.stores import EventBus, StepStore
    from xjobs.run.signal import RunSignal


class ClaimedRun(Protocol):
    """What a context reads of its run (a `RunRecord`): the claimed job, its tenant, its fence,
    and the job's step timeout."""

    @property
    def job(self) -> ClaimedJob:
        """The claimed job."""
        ...

    @property
    def tenant(self) -> str | None:
        """The org the run acts for."""
        ...

    @property
    def claim(self) -> Claim:
        """The fence every write of the run carries."""
        ...

    @property
    def step_timeout_ms(self) -> int | None:
        """The job's `step_timeout`, in ms (`None`: none, or a job this process does not know)."""
        ...


@dataclass(frozen=True, slots=True)
class RunTools:
    """What every run of one worker shares; a run's context builds its step API and its progress
    throttle from it when the body first asks (a body that uses neither costs neither)."""

    clock: Clock
    record_progress: Callable[[Claim, float], Awaitable[bool]]
    steps: StepStore | None = None
    events: EventBus | None = None
    observer: Observer = NOOP
    children: ChildStore | None = None


class RunIdentity:
    """What every body knows of its run: ids, name, queue, attempts, the tenant it acts for, and
    who enqueued it (attribution, never authority). Read from the claimed job, never copied."""

    __slots__ = ("_job", "_tenant")

    def __init__(self, job: ClaimedJob, tenant: str | None) -> None:
        self._job = job
        self._tenant = tenant

    @property
    def job_id(self) -> str:
        """The job's id (the same on every attempt)."""
        return self._job.id

    @property
    def run_id(self) -> str:
        """The run's id: a requeue starts a new run of the same job."""
        return self._job.run_id

    @property
    def name(self) -> str:
        """The job's registered name."""
        return self._job.name

    @property
    def queue(self) -> str:
        """The queue the job was claimed from."""
        return self._job.queue

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self._job.attempt

    @property
    def max_attempts(self) -> int:
        """How many attempts the job has in all."""
        return self._job.max_attempts

    @property
    def final_attempt(self) -> bool:
        """Whether a failure of this attempt is the job's last (no retry follows)."""
        return self._job.attempt >= self._job.max_attempts

    @property
    def tenant(self) -> str | None:
        """The org this run acts for (`None` for `tenant="none"`)."""
        return self._tenant

    @property
    def enqueued_by(self) -> str | None:
        """Who enqueued the job (attribution, never authority)."""
        return self._job.enqueued_by

    @property
    def traceparent(self) -> str | None:
        """The W3C traceparent the enqueue carried, if any."""
        return self._job.traceparent

    def __repr__(self) -> str:
        job = self._job
        return (
            f"{type(self).__name__}(job_id={job.id!r}, run_id={job.run_id!r}, name={job.name!r}, "
            f"queue={job.queue!r}, attempt={job.attempt}, max_attempts={job.max_attempts}, "
            f"tenant={self._tenant!r})"
        )


class JobContext(RunIdentity):
    """The run's identity (`job_id`, `run_id`, `attempt`, …), its durable `step`s and its `progress()` reporter."""

    __slots__ = ("_claim", "_progress", "_signal", "_step", "_step_timeout_ms", "_tools")

    def __init__(self, run: ClaimedRun, signal: RunSignal, tools: RunTools) -> None:
        super().__init__(run.job, run.tenant)
        self._claim = run.claim
        self._step_timeout_ms = run.step_timeout_ms
        self._signal = signal
        self._tools = tools
        self._step: ChildSteps | None = None
        self._progress: ProgressThrottle | None = None

    @property
    def step(self) -> ChildSteps:
        """The run's durable steps: `run`, `sleep`, `wait_for_event`, and the child jobs `invoke`,
        `map`, `spawn` (made on first use)."""
        if self._step is None:
            tools = self._tools
            self._step = ChildSteps(
                StepRun(
                    self._claim,
                    self._job.run_id,
                    self._job.queue,
                    self._step_timeout_ms,
                    self._tenant,
                    self._job.name,
                ),
                store=tools.steps,
                events=tools.events,
                children=tools.children,
                clock=tools.clock,
                signal=self._signal,
                observer=tools.observer,
            )
        return self._step

    async def progress(self, value: float) -> None:
        """Report how far the run is, from 0.0 to 1.0 (throttled; the last value is always written)."""
        if self._progress is None:
            self._progress = _throttle(self._tools, self._claim)
        await self._progress.report(value)

    @property
    def cancelled(self) -> bool:
        """Whether the worker has aborted this run (lease lost, cancelled, deadline, drain)."""
        return self._signal.aborted


class SyncJobContext(RunIdentity):
    """What a plain `def` body sees, from its thread: the run's identity, a `progress()` it may call
    and a `cancelled` flag it may poll. Durable steps need an `async def` body."""

    __slots__ = ("_loop", "_progress", "_signal")

    def __init__(self, run: ClaimedRun, signal: RunSignal, tools: RunTools) -> None:
        super().__init__(run.job, run.tenant)
        # made here, on the loop: the body's thread only hands reports to it
        self._progress: ProgressThrottle | None = _throttle(tools, run.claim)
        self._signal = signal
        self._loop = asyncio.get_running_loop()

    def progress(self, value: float) -> None:
        """Report how far the run is, from 0.0 to 1.0 (handed to the worker's loop, throttled;
        the last value is always written before the settle)."""
        checked = finite_option("progress", value, minimum=0.0, maximum=1.0)
        assert self._progress is not None
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


def _throttle(tools: RunTools, claim: Claim) -> ProgressThrottle:
    return ProgressThrottle(tools.clock, functools.partial(tools.record_progress, claim))


def progress_of(ctx: JobContext | SyncJobContext) -> ProgressThrottle | None:
    """The run's progress throttle, flushed before its settle; `None` when the body reported none."""
    return ctx._progress
