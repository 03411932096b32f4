"""`Operator`: what `app.operator`, the `xjobs` commands and the web page call to see and steer jobs;
`TenantOperator`, the same bound to one tenant (`for_tenant`)."""

from __future__ import annotations

from dataclasses import replace

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.backfills import MAX_BACKFILL_ROWS, BackfillRow, rows_limit
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
from xjobs.declare.registry import Registry
from xjobs.errors import (
    FilterInvalidError,
    JobNotFoundError,
    TenantScopeInvalidError,
    TenantScopeSharedError,
)
from xjobs.names import validate_job_name, validate_queue
from xjobs.operate.cursor import decode_cursor, encode_cursor
from xjobs.operate.detail import JobDetail, job_detail
from xjobs.operate.filters import MAX_NAME_CHARS, batch_limit, page_limit
from xjobs.operate.moves import moved
from xjobs.operate.scoped_counts import tenant_queues
from xjobs.operate.views import TaskView, WorkerView, task_views, worker_views

NOTHING_MOVED = BulkResult(0, 0)


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

    # -- scope (`TenantOperator` narrows these) ---------------------------------------------------

    def _narrow(self, where: JobFilter) -> JobFilter | None:
        """`where` as this operator may read it; `None` when it can match none of its jobs."""
        return where

    async def _own(self, job_id: str) -> None:
        """Refuse a move on a job this operator may not steer (every job, unscoped)."""

    # -- read -------------------------------------------------------------------------------------

    async def list_jobs(
        self,
        where: JobFilter | None = None,
        *,
        limit: int = DEFAULT_JOB_PAGE,
        after: str | None = None,
    ) -> JobPage:
        """One page, newest first by `(created_at, id)`; pass the page's `cursor` as `after`."""
        size = page_limit(limit)
        scoped = self._narrow(where or JobFilter())
        if scoped is None:
            return JobPage((), None)
        position = decode_cursor(after, scoped) if after is not None else None
        rows = await self._ops.list_jobs(scoped, limit=size + 1, after=position)
        jobs = tuple(rows[:size])
        more = len(rows) > size
        cursor = encode_cursor(jobs[-1].position, scoped) if more and jobs else None
        return JobPage(jobs, cursor)

    @property
    def tenant(self) -> str | None:
        """The one tenant this operator sees and steers; `None`: every tenant."""
        return None

    def for_tenant(self, tenant: str) -> Operator:
        """This operator bound to one tenant: it lists, counts, shows and moves only that
        tenant's jobs, another tenant's job is not found, and what every tenant shares is
        read-only. `None`, "" (or too long, a NUL) is `XJOBS_TENANT_SCOPE_INVALID`."""
        return TenantOperator(self._backend, self._registry, self._clock, valid_tenant(tenant))

    async def record(self, job_id: str) -> JobRecord:
        """The stored record of one job (no steps, errors or input); unknown: `XJOBS_JOB_NOT_FOUND`."""
        record = await self._backend.jobs.get(job_id)
        if record is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        return record

    async def get_job(self, job_id: str) -> JobDetail:
        """The whole record as an operator reads it: redacted input, steps, every attempt's error."""
        record = await self.record(job_id)
        steps = []
        if self._backend.steps is not None:
            steps = await self._backend.steps.list(record.run_id, record.queue)
        errors = await self._ops.errors(job_id)
        handle = self._registry.jobs.get(record.name)
        return job_detail(handle, record, steps, errors)

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
        running_filter = self._narrow(JobFilter(states=("running",)))
        assert running_filter is not None
        running = await self._ops.list_jobs(running_filter, limit=MAX_JOB_PAGE, after=None)
        return worker_views(infos, running)

    async def tasks(self) -> list[TaskView]:
        """Every registered task: its cron, zone, next occurrence, last fire and pause."""
        state = self._backend.scheduler
        names = sorted(self._registry.tasks)
        fires = await state.task_fires(names) if state is not None and names else {}
        paused = await state.paused(names) if state is not None and names else set()
        return task_views(self._registry.tasks, fires, paused, self._clock.now_ms())

    async def backfills(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        """The backfill ledger's runs (of one sweep, or all), newest start first."""
        self._backend.require("backfills")
        assert self._backend.backfills is not None
        return await self._backend.backfills.rows(name, rows_limit(limit))

    # -- steer one job ----------------------------------------------------------------------------

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRecord:
        """Cancel a live job (its worker's next heartbeat cancels the run)."""
        await self._own(job_id)
        return moved("cancel", job_id, await self._backend.jobs.cancel(job_id, reason))

    async def retry(self, job_id: str) -> JobRecord:
        """Requeue a finished job now, attempts reset."""
        await self._own(job_id)
        return moved("requeue", job_id, await self._backend.jobs.requeue(job_id))

    async def promote(self, job_id: str) -> JobRecord:
        """Make a delayed or retrying job due now."""
        await self._own(job_id)
        return moved("promote", job_id, await self._ops.promote(job_id))

    async def remove(self, job_id: str) -> JobRecord:
        """Delete a finished job with its steps and errors; answers the record as it was."""
        await self._own(job_id)
        return moved("remove", job_id, await self._ops.remove(job_id))

    # -- steer many -------------------------------------------------------------------------------

    async def cancel_where(
        self, where: JobFilter, *, limit: int = MAX_BULK_BATCH, reason: str | None = None
    ) -> BulkResult:
        """Cancel a batch of the live jobs `where` names."""
        limit, scoped = batch_limit(limit), self._narrow(where)
        if scoped is None:
            return NOTHING_MOVED
        return await self._ops.cancel_many(scoped, limit, reason)

    async def retry_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Requeue a batch of the finished jobs `where` names."""
        limit, scoped = batch_limit(limit), self._narrow(where)
        return NOTHING_MOVED if scoped is None else await self._ops.retry_many(scoped, limit)

    async def promote_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Make a batch of the delayed or retrying jobs `where` names due now."""
        limit, scoped = batch_limit(limit), self._narrow(where)
        return NOTHING_MOVED if scoped is None else await self._ops.promote_many(scoped, limit)

    async def remove_where(self, where: JobFilter, *, limit: int = MAX_BULK_BATCH) -> BulkResult:
        """Delete a batch of the finished jobs `where` names."""
        limit, scoped = batch_limit(limit), self._narrow(where)
        return NOTHING_MOVED if scoped is None else await self._ops.remove_many(scoped, limit)

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


def valid_tenant(tenant: object) -> str:
    """The tenant a scope names: a non-empty string without NUL; anything else is refused, so an
    empty or missing tenant never reads as "every tenant"."""
    if (
        not isinstance(tenant, str)
        or not tenant
        or len(tenant) > MAX_NAME_CHARS
        or "\x00" in tenant
    ):
        raise TenantScopeInvalidError(
            f"a tenant scope names one tenant: 1 to {MAX_NAME_CHARS} characters with no NUL "
            f"(got {tenant!r:.40}); an unscoped operator is app.operator itself"
        )
    return tenant


class TenantOperator(Operator):
    """Lists, counts, shows and moves only one tenant's jobs and reads only its sweeps; reads the
    shared pauses, workers (their running jobs narrowed to the tenant) and tasks; refuses pauses
    and the counters."""

    def __init__(self, backend: Backend, registry: Registry, clock: Clock, tenant: str) -> None:
        super().__init__(backend, registry, clock)
        self._tenant = valid_tenant(tenant)

    @property
    def tenant(self) -> str:
        """The one tenant this operator sees and steers."""
        return self._tenant

    def for_tenant(self, tenant: str) -> Operator:
        """This operator again for its own tenant; a scope is never switched or widened."""
        if valid_tenant(tenant) != self._tenant:
            raise TenantScopeInvalidError(
                "this operator is bound to one tenant; ask the unscoped app.operator for another"
            )
        return self

    def _narrow(self, where: JobFilter) -> JobFilter | None:
        if where.tenant is not None and where.tenant != self._tenant:
            return None  # another tenant's jobs: none of them exist to this operator
        return replace(where, tenant=self._tenant)

    async def _own(self, job_id: str) -> None:
        # A job's tenant never changes once stored, so reading it before the move is not a race.
        await self.record(job_id)

    async def record(self, job_id: str) -> JobRecord:
        """The record of one of the tenant's jobs; another tenant's is `XJOBS_JOB_NOT_FOUND`."""
        record = await super().record(job_id)
        if record.tenant_id != self._tenant:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        return record

    async def queues(self) -> list[QueueCounts]:
        """The queues holding the tenant's jobs, each counted over the tenant's jobs alone."""
        return await tenant_queues(self._ops, self._tenant, self._clock.now_ms())

    async def counters(
        self, tier: CounterTier = "minute", since_ms: int = 0
    ) -> list[CounterBucket]:
        """Refused: a counter sums every tenant's runs of a job name."""
        raise TenantScopeSharedError(
            "the counters sum every tenant's runs; a tenant-scoped operator does not read them"
        )

    async def tasks(self) -> list[TaskView]:
        """Every registered task (the schedule is the app's); a last fire shows only when the job
        it enqueued is the tenant's."""
        views = await super().tasks()
        shown = []
        for view in views:
            fire = view.last_fire
            if fire is not None:
                fired = await self._backend.jobs.get(fire.job_id)
                if fired is None or fired.tenant_id != self._tenant:
                    view = replace(view, last_fire=None)
            shown.append(view)
        return shown

    async def backfills(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        """The runs of sweeps of this tenant alone; a cross-tenant sweep (`tenant="none"`) and
        another tenant's are withheld (a page may then hold fewer than `limit` runs)."""
        rows = await super().backfills(name, limit)
        return [row for row in rows if row.tenant == self._tenant]

    async def pause(self, kind: PauseKind, name: str) -> bool:
        """Refused: a queue or a job name is shared by every tenant."""
        raise _shared(f"a {kind} pause")

    async def resume(self, kind: PauseKind, name: str) -> bool:
        """Refused: a queue or a job name is shared by every tenant."""
        raise _shared(f"a {kind} pause")


def _shared(what: str) -> TenantScopeSharedError:
    return TenantScopeSharedError(
        f"{what} is shared by every tenant; a tenant-scoped operator may not steer it"
    )
