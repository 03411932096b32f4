"""One tenant's queue counts, read through `list_jobs` (bounded as every queue count is, at
`COUNT_CAP` per state) since the queue counts of `JobIntrospection` sum every tenant."""

from __future__ import annotations

import asyncio

from xjobs.contract.driver import JobState
from xjobs.contract.introspection import (
    COUNT_CAP,
    JobFilter,
    JobIntrospection,
    JobSummary,
    QueueCounts,
)

COUNTED: tuple[JobState, ...] = ("ready", "running", "waiting", "dead", "failed")


async def _rows(
    ops: JobIntrospection, tenant: str, queue: str, state: JobState
) -> list[JobSummary]:
    where = JobFilter(states=(state,), queue=queue, tenant=tenant)
    return await ops.list_jobs(where, limit=COUNT_CAP, after=None)


async def _counted(
    ops: JobIntrospection, tenant: str, shared: QueueCounts, now_ms: int
) -> QueueCounts | None:
    ready, running, waiting, dead, failed = await asyncio.gather(
        *(_rows(ops, tenant, shared.queue, state) for state in COUNTED)
    )
    if not (ready or running or waiting or dead or failed):
        return None
    due = [job.run_at_ms for job in ready if job.run_at_ms <= now_ms]
    return QueueCounts(
        queue=shared.queue,
        ready=len(due),
        scheduled=len(ready) - len(due),
        running=len(running),
        waiting=len(waiting),
        dead=len(dead),
        failed=len(failed),
        # among the newest COUNT_CAP ready jobs: exact below the cap
        oldest_ready_ms=min(due) if due else None,
        paused=shared.paused,
    )


async def tenant_queues(ops: JobIntrospection, tenant: str, now_ms: int) -> list[QueueCounts]:
    """Each queue in which the tenant has a counted job, by name, its pause as every tenant sees it."""
    counted = [await _counted(ops, tenant, shared, now_ms) for shared in await ops.queues(now_ms)]
    return [queue for queue in counted if queue is not None]
