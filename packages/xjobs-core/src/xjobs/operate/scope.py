"""`TenantOperator`: an `Operator` bound to one tenant. Another tenant's job does not exist to it
(`XJOBS_JOB_NOT_FOUND`, nothing changed); what every tenant shares it reads but never steers."""

from __future__ import annotations

from dataclasses import replace

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.backfills import MAX_BACKFILL_ROWS, BackfillRow
from xjobs.contract.driver import JobRecord
from xjobs.contract.introspection import (
    CounterBucket,
    CounterTier,
    JobFilter,
    PauseKind,
    QueueCounts,
)
from xjobs.declare.registry import Registry
from xjobs.errors import JobNotFoundError, TenantScopeInvalidError, TenantScopeSharedError
from xjobs.operate.filters import MAX_NAME_CHARS
from xjobs.operate.operator import Operator
from xjobs.operate.scoped_counts import tenant_queues
from xjobs.operate.views import TaskView


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
