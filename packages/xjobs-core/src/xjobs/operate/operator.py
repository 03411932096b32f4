"""`Operator`: what `app.operator`, the `xjobs` commands and the web page call to see and steer jobs."""

from __future__ import annotations

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import BulkResult, JobRecord
from xjobs.contract.introspection import (
    DEFAULT_JOB_PAGE,
    MAX_BULK_BATCH,
    MAX_JOB_PAGE,
    CounterBucket,
    CounterTier,
    JobFilter,
    JobIntrospection,
    JobPage,
    Pause,
    PauseKind,
    QueueCounts,
)
from xjobs.contract.moves import moved
from xjobs.declare.registry import Registry
from xjobs.errors import FilterInvalidError, JobNotFoundError
from xjobs.names import validate_job_name, validate_queue
from xjobs.operate.cursor import decode_cursor, encode_cursor
from xjobs.operate.detail import JobDetail, redacted_input
from xjobs.operate.filters import batch_limit, page_limit
from xjobs.operate.views import TaskView, WorkerView, task_views, worker_views


class Operator:
    """The operator surface over one backend: every call is a member of `JobIntrospection` or a
    store the backend already has; arguments are checked here before a driver sees them."""

    def __init__(self, backend: Backend, registry: Registry, clock: Clock) -> None:
        backend.require("introspection")
        assert backend.introspection is not None
        self._backend = backend
        self._ops: JobIntrospection = backend.introspection
        self._registry = registry
        self._clock = clock

    # -- read -------------------------------------------------------------------------------------

    async def list_jobs(
        self,
        where: JobFilter | None = None,
        *,
        limit: int = DEFAULT_JOB_PAGE,
        after: str | None = None,
    ) -> JobPage:
        """One page, newest first by `(created_at, id)`; pass the page's `cursor` as `after`."""
        where = where or JobFilter()
        position = decode_cursor(after, where) if after is not None else None
        rows = await self._ops.list_jobs(where, limit=page_limit(limit) + 1, after=position)
        jobs = tuple(rows[:limit])
        more = len(rows) > limit
        cursor = encode_cursor(jobs[-1].position, where) if more and jobs else None
        return JobPage(jobs, cursor)

    async def get_job(self, job_id: str) -> JobDetail:
        """The whole record as an operator reads it: redacted input, steps, every attempt's error."""
        record = await self._backend.jobs.get(job_id)
        if record is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        steps = []
        if self._backend.steps is not None:
            steps = await self._backend.steps.list(record.run_id, record.queue)
        errors = await self._ops.errors(job_id)
        handle = self._registry.jobs.get(record.name)
        return JobDetail(
            record, redacted_input(handle, record.payload), tuple(steps), tuple(errors)
        )

    async def queues(self) -> list[QueueCounts]:
        """Every queue's counts, its oldest due job and whether it is paused."""
        return await self._ops.queues(self._clock.now_ms())

    async def counters(
        self, tier: CounterTier = "minute", since_ms: int = 0
    ) -> list[CounterBucket]:
        """The counter buckets of `tier` from `since_ms` on."""
        if tier not in ("minute", "hour", "day"):
            raise FilterInvalidError(f"counter tier is minute, hour or day; got {tier!r}")
        return await self._ops.counters(tier, since_ms)

    async def pauses(self) -> list[Pause]:
        """Every pause row."""
        return await self._ops.pauses()

    async def workers(self) -> list[WorkerView]:
        """The live worker rows, each with the jobs it is running now."""
        self._backend.require("workers")
        assert self._backend.workers is not None
        infos = await self._backend.workers.list()
        running = await self._ops.list_jobs(
            JobFilter(states=("running",)), limit=MAX_JOB_PAGE, after=None
        )
        return worker_views(infos, running)

    async def tasks(self) -> list[TaskView]:
        """Every registered task: its cron, zone, next occurrence, last fire and pause."""
        state = self._backend.scheduler
        names = sorted(self._registry.tasks)
        fires = await state.task_fires(names) if state is not None and names else {}
        paused = await state.paused(names) if state is not None and names else set()
        return task_views(self._registry.tasks, fires, paused, self._clock.now_ms())

    # -- steer one job ----------------------------------------------------------------------------

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRecord:
        """Cancel a live job (its worker's next heartbeat cancels the run)."""
        return moved("cancel", job_id, await self._backend.jobs.cancel(job_id, reason))

    async def retry(self, job_id: str) -> JobRecord:
        """Requeue a finished job now, attempts reset."""
        return moved("requeue", job_id, await self._backend.jobs.requeue(job_id))

    async def promote(self, job_id: str) -> JobRecord:
        """Make a delayed or retrying job due now."""
        return moved("promote", job_id, await self._ops.promote(job_id))

    async def remove(self, job_id: str) -> JobRecord:
        """Delete a finished job with its steps and errors; answers the record as it was."""
        return moved("remove", job_id, await self._ops.remove(job_id))

    # -- steer many -------------------------------------------------------------------------------

    async def cancel_where(
        self, where: JobFilter, *, limit: int = MAX_BULK_BATCH, reason: str | None = None
    ) -> BulkResult:
        """Cancel a batch of the live jobs `where` names."""
        return await self._ops.cancel_many(where, batch_limit(limit), reason)

    async def retry_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Requeue a batch of the finished jobs `where` names."""
        return await self._ops.retry_many(where, batch_limit(limit))

    async def promote_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Make a batch of the delayed or retrying jobs `where` names due now."""
        return await self._ops.promote_many(where, batch_limit(limit))

    async def remove_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Delete a batch of the finished jobs `where` names."""
        return await self._ops.remove_many(where, batch_limit(limit))

    # -- pauses -----------------------------------------------------------------------------------

    async def pause(self, kind: PauseKind, name: str) -> bool:
        """Pause a queue, or a job name in every queue; answers whether it was running."""
        return await self._ops.pause(kind, _pause_target(kind, name))

    async def resume(self, kind: PauseKind, name: str) -> bool:
        """Resume a queue or a job name; answers whether it was paused."""
        return await self._ops.resume(kind, _pause_target(kind, name))


def _pause_target(kind: str, name: str) -> str:
    if kind == "queue":
        return validate_queue(name)
    if kind == "job":
        return validate_job_name(name)
    raise FilterInvalidError(f"a pause names a queue or a job; got {kind!r}")
