"""The memory backend's operator surface: lists, queue counts, counters, pauses and bulk verbs."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import islice

from xjobs.clock import Clock
from xjobs.contract.driver import FINISHED_STATES, JOB_STATES, LIVE_STATES, BulkResult, JobMove
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
from xjobs.memory.listing import Key
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

    def _queues(self, where: JobFilter) -> list[str]:
        return sorted(self._jobs.listing.queues()) if where.queue is None else [where.queue]

    def _matching(self, keys: Iterator[Key], where: JobFilter) -> Iterator[JobRow]:
        """The rows of `keys` that match `where` (its states and queue are the keys' own)."""
        for _, job_id in keys:
            row = self._jobs.row(job_id)
            if row is not None and _matches(row, where):
                yield row

    def _oldest_first(self, where: JobFilter, states: tuple[str, ...]) -> Iterator[JobRow]:
        listing = self._jobs.listing
        walks = [listing.oldest_first(q, s) for q in self._queues(where) for s in states]
        return self._matching(heapq.merge(*walks), where)

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        before: Key | None = None if after is None else (after.created_at_ms, after.id)
        if where.created_before_ms is not None and (
            before is None or where.created_before_ms <= before[0]
        ):
            before = (where.created_before_ms, "")
        listing = self._jobs.listing
        states = where.states or JOB_STATES
        walks = [listing.newest_first(q, s, before) for q in self._queues(where) for s in states]
        rows = self._matching(heapq.merge(*walks, reverse=True), where)
        return [r.summary() for r in islice(rows, limit)]

    async def errors(self, job_id: str) -> list[AttemptError]:
        return self._jobs.ledger.errors(job_id)

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        listing = self._jobs.listing
        names = listing.queues() | {p.name for p in self._jobs.ledger.pauses() if p.kind == "queue"}
        out = []
        for name in sorted(names):
            scheduled = listing.scheduled(name, now_ms)

            def capped(state: str, name: str = name) -> int:
                return min(listing.count(name, state), COUNT_CAP)

            out.append(
                QueueCounts(
                    queue=name,
                    ready=min(listing.count(name, "ready") - scheduled, COUNT_CAP),
                    scheduled=min(scheduled, COUNT_CAP),
                    running=capped("running"),
                    waiting=capped("waiting"),
                    dead=capped("dead"),
                    failed=capped("failed"),
                    oldest_ready_ms=listing.oldest_due(name, now_ms),
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

    def _batch(self, where: JobFilter, states: tuple[str, ...], limit: int) -> list[JobRow]:
        """The oldest `limit` rows to move and up to `COUNT_CAP` beyond them (what remains, read
        "at least" at the cap), taken before any of them moves."""
        return list(islice(self._oldest_first(where, states), limit + COUNT_CAP))

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        rows = self._batch(where, only_states(where, sorted(LIVE_STATES)), limit)
        for row in rows[:limit]:
            await self._jobs.cancel(row.id, reason)
        return _moved(rows, limit)

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        if where.states and "ready" not in where.states:
            return BulkResult(moved=0, remaining=0)
        now = self._clock.now_ms()
        delayed = (r for r in self._oldest_first(where, ("ready",)) if r.run_at_ms > now)
        rows = list(islice(delayed, limit + COUNT_CAP))
        for row in rows[:limit]:
            self._jobs.promote(row.id)
        return _moved(rows, limit)

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        rows = self._batch(where, only_states(where, sorted(FINISHED_STATES)), limit)
        for row in rows[:limit]:
            self._jobs.remove(row.id)
        return _moved(rows, limit)

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        return self._jobs.retry_many(self._batch(where, states, limit), limit)


def _moved(rows: list[JobRow], limit: int) -> BulkResult:
    return BulkResult(moved=min(len(rows), limit), remaining=max(len(rows) - limit, 0))
