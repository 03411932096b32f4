"""The memory backend's `RetentionStore`: the purge of finished jobs, events, worker rows and counter buckets in one process."""

from __future__ import annotations

from xjobs.contract.driver import FINISHED_STATES
from xjobs.contract.retention import COUNTER_TIERS, Keep, PurgeCut, PurgeStore
from xjobs.memory.children import MemoryChildStore
from xjobs.memory.driver import MemoryJobDriver
from xjobs.memory.events import MemoryEventBus
from xjobs.memory.rows import JobRow
from xjobs.memory.workers import MemoryWorkerRegistry


class MemoryRetention:
    """Deletes through the stores' own removals, so a job's steps, errors and wait go with it.

    A published outbox row is deleted at publish here, so the outbox has nothing to purge. A
    finished child whose parent is still live is kept: the parent reads its result later.
    """

    def __init__(
        self,
        jobs: MemoryJobDriver,
        events: MemoryEventBus,
        workers: MemoryWorkerRegistry,
        children: MemoryChildStore | None = None,
    ) -> None:
        self._children = children
        self._jobs = jobs
        self._events = events
        self._workers = workers
        self.policy: Keep | None = None

    def keep(self, policy: Keep | None) -> None:
        self.policy = policy

    def _expired_jobs(self, cut: PurgeCut) -> list[JobRow]:
        doomed: list[tuple[int, str, JobRow]] = []
        for row in self._jobs.rows():
            if row.state not in FINISHED_STATES or row.finished_at_ms is None:
                continue
            if self._children is not None and self._children.held(row.id):
                continue
            cutoff = cut.job_cutoff(row.name, row.state)
            if cutoff is not None and row.finished_at_ms < cutoff:
                doomed.append((row.finished_at_ms, row.id, row))
        return [row for _, _, row in sorted(doomed, key=lambda d: (d[0], d[1]))]

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        if store == "jobs":
            gone = 0
            for row in self._expired_jobs(cut)[:limit]:
                gone += self._jobs.remove(row.id).status == "done"
            return gone
        if store == "events":
            return await self._events.purge_expired(cut.events)
        if store == "workers":
            return self._workers.purge(cut.workers, limit)
        if store == "counters":
            gone = 0
            for tier in COUNTER_TIERS:
                gone += self._jobs.ledger.purge(tier, cut.counters[tier], limit - gone)
            return gone
        return 0  # the outbox: a published row was deleted at publish

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        if store == "jobs":
            return len(self._expired_jobs(cut))
        if store == "events":
            return self._events.expired(cut.events)
        if store == "workers":
            return self._workers.stale(cut.workers)
        if store == "counters":
            ledger = self._jobs.ledger
            return sum(len(ledger.purgeable(tier, cut.counters[tier])) for tier in COUNTER_TIERS)
        return 0
