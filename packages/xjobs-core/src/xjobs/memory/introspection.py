"""The memory backend's operator surface: lists, queue counts, counters, pauses and bulk verbs."""

from __future__ import annotations

from xjobs.clock import Clock
from xjobs.contract.driver import FINISHED_STATES, LIVE_STATES, BulkResult, JobMove
from xjobs.contract.introspection import (
    COUNT_CAP,
    AttemptError,
    CounterBucket,
    CounterTier,
    JobFilter,
    JobPosition,
    JobSummary,
    Pause,
    PauseKind,
    QueueCounts,
    only_states,
)
from xjobs.memory.driver import MemoryJobDriver
from xjobs.memory.rows import JobRow


def _matches(row: JobRow, where: JobFilter) -> bool:
    return (
        (not where.states or row.state in where.states)
        and (where.queue is None or row.queue == where.queue)
        and (where.name is None or row.name == where.name)
        and (where.tenant is None or row.tenant_id == where.tenant)
        and (where.created_after_ms is None or row.created_at_ms > where.created_after_ms)
        and (where.created_before_ms is None or row.created_at_ms < where.created_before_ms)
    )


class MemoryIntrospection:
    """`JobIntrospection` over the memory driver's rows and ledger."""

    def __init__(self, clock: Clock, jobs: MemoryJobDriver) -> None:
        self._clock = clock
        self._jobs = jobs

    def _oldest_first(self, where: JobFilter, states: tuple[str, ...]) -> list[JobRow]:
        rows = [r for r in self._jobs.rows() if r.state in states and _matches(r, where)]
        return sorted(rows, key=lambda r: (r.created_at_ms, r.id))

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        rows = [r for r in self._jobs.rows() if _matches(r, where)]
        if after is not None:
            rows = [r for r in rows if (r.created_at_ms, r.id) < (after.created_at_ms, after.id)]
        rows.sort(key=lambda r: (r.created_at_ms, r.id), reverse=True)
        return [r.summary() for r in rows[:limit]]

    async def errors(self, job_id: str) -> list[AttemptError]:
        return self._jobs.ledger.errors(job_id)

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        names = {r.queue for r in self._jobs.rows()}
        names |= {p.name for p in self._jobs.ledger.pauses() if p.kind == "queue"}
        out = []
        for name in sorted(names):
            rows = [r for r in self._jobs.rows() if r.queue == name]
            due = [r for r in rows if r.state == "ready" and r.run_at_ms <= now_ms]

            def capped(state: str, rows: list[JobRow] = rows) -> int:
                return min(sum(1 for r in rows if r.state == state), COUNT_CAP)

            out.append(
                QueueCounts(
                    queue=name,
                    ready=min(len(due), COUNT_CAP),
                    scheduled=min(
                        sum(1 for r in rows if r.state == "ready" and r.run_at_ms > now_ms),
                        COUNT_CAP,
                    ),
                    running=capped("running"),
                    waiting=capped("waiting"),
                    dead=capped("dead"),
                    failed=capped("failed"),
                    oldest_ready_ms=min((r.run_at_ms for r in due), default=None),
                    paused=self._jobs.ledger.paused("queue", name),
                )
            )
        return out

    async def counters(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        return self._jobs.ledger.buckets(tier, since_ms)

    async def rollup_counters(self, now_ms: int) -> int:
        return self._jobs.ledger.rollup(now_ms)

    async def pause(self, kind: PauseKind, name: str) -> bool:
        return self._jobs.ledger.pause(kind, name, self._clock.now_ms())

    async def resume(self, kind: PauseKind, name: str) -> bool:
        resumed = self._jobs.ledger.resume(kind, name)
        if resumed:
            self._jobs.wake_all()
        return resumed

    async def pauses(self) -> list[Pause]:
        return self._jobs.ledger.pauses()

    async def promote(self, job_id: str) -> JobMove:
        return self._jobs.promote(job_id)

    async def remove(self, job_id: str) -> JobMove:
        return self._jobs.remove(job_id)

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        rows = self._oldest_first(where, only_states(where, sorted(LIVE_STATES)))
        for row in rows[:limit]:
            await self._jobs.cancel(row.id, reason)
        return BulkResult(moved=min(len(rows), limit), remaining=max(len(rows) - limit, 0))

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        now = self._clock.now_ms()
        rows = [r for r in self._oldest_first(where, ("ready",)) if r.run_at_ms > now]
        if where.states and "ready" not in where.states:
            rows = []
        for row in rows[:limit]:
            self._jobs.promote(row.id)
        return BulkResult(moved=min(len(rows), limit), remaining=max(len(rows) - limit, 0))

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        rows = self._oldest_first(where, only_states(where, sorted(FINISHED_STATES)))
        for row in rows[:limit]:
            self._jobs.remove(row.id)
        return BulkResult(moved=min(len(rows), limit), remaining=max(len(rows) - limit, 0))

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        return self._jobs.retry_many(self._oldest_first(where, states), limit)
