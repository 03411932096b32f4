"""The memory event bus: events and waits in one process, each call atomic, on the injected clock."""

from __future__ import annotations

from dataclasses import replace

from xjobs.clock import Clock
from xjobs.contract.driver import Claim, Nack
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.event_match import decode_object, matches
from xjobs.ids import new_id
from xjobs.memory.driver import MemoryJobDriver


class MemoryEventBus:
    """Events per (tenant, name) in send order, and at most one wait per job."""

    def __init__(self, clock: Clock, jobs: MemoryJobDriver) -> None:
        self._clock = clock
        self._jobs = jobs
        self._events: dict[tuple[str | None, str], list[EventRecord]] = {}
        self._waits: dict[str, EventWait] = {}  # by job id
        jobs.on_remove(self._forget_run)

    def _forget_run(self, run_id: str) -> None:
        """A removed (or purged) job's wait goes with it."""
        for job_id in [j for j, w in self._waits.items() if w.run_id == run_id]:
            del self._waits[job_id]

    async def now(self) -> int:
        return self._clock.now_ms()

    async def send(self, name: str, payload: str, *, tenant: str | None = None) -> EventRecord:
        record = EventRecord(new_id(), name, payload, self._clock.now_ms(), tenant)
        self._events.setdefault((tenant, name), []).append(record)
        body = decode_object(payload)
        for wait in [w for w in self._waits.values() if (w.tenant, w.event) == (tenant, name)]:
            if matches(body, decode_object(wait.match)):
                del self._waits[wait.job_id]
                self._jobs.wake_waiting(wait.job_id, wait.run_id)
        return record

    def _find(self, name: str, match: str, since_ms: int, tenant: str | None) -> EventRecord | None:
        wanted = decode_object(match)
        sent = self._events.get((tenant, name), [])
        candidates = [e for e in sent if e.sent_at_ms >= since_ms]
        for event in sorted(candidates, key=lambda e: (e.sent_at_ms, e.id)):
            if matches(decode_object(event.payload), wanted):
                return event
        return None

    async def find(
        self, name: str, match: str, since_ms: int, *, tenant: str | None = None
    ) -> EventRecord | None:
        return self._find(name, match, since_ms, tenant)

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        if not self._jobs.holds(claim):
            return False
        if self._find(wait.event, wait.match, wait.since_ms, wait.tenant) is not None:
            nack = replace(nack, run_at_ms=self._clock.now_ms())
        self._waits[wait.job_id] = wait
        return await self._jobs.nack(claim, nack)

    async def purge_expired(self, older_than_ms: int) -> int:
        purged = 0
        for topic, events in list(self._events.items()):
            kept = [e for e in events if e.sent_at_ms >= older_than_ms]
            purged += len(events) - len(kept)
            if kept:
                self._events[topic] = kept
            else:
                del self._events[topic]
        for job_id, wait in list(self._waits.items()):
            if wait.deadline_ms is not None and wait.deadline_ms < older_than_ms:
                del self._waits[job_id]
                purged += 1
        return purged

    def expired(self, older_than_ms: int) -> int:
        """How many events and lapsed waits `purge_expired(older_than_ms)` would delete."""
        events = sum(1 for es in self._events.values() for e in es if e.sent_at_ms < older_than_ms)
        waits = sum(
            1
            for w in self._waits.values()
            if w.deadline_ms is not None and w.deadline_ms < older_than_ms
        )
        return events + waits
