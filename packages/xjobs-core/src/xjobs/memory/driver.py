"""The memory job driver: the reference for every job-driver rule the parity suite pins."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xjobs.clock import Clock
from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import (
    FINISHED_STATES,
    LAPSED_ON_FINAL_ATTEMPT,
    LIVE_STATES,
    BulkResult,
    Claim,
    ClaimedJob,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobMove,
    JobRecord,
    Nack,
    NewJob,
    assert_claim_queues,
)
from xjobs.contract.introspection import AttemptError
from xjobs.memory.ledger import MemoryLedger
from xjobs.memory.listing import ListingIndex
from xjobs.memory.rows import JobRow
from xjobs.memory.workers import MemoryWorkerRegistry

_Entry = tuple[int, int, str, int]  # (priority, run_at_ms, id, version)


@dataclass
class _Queue:
    due: list[_Entry] = field(default_factory=list)
    delayed: list[tuple[int, str, int]] = field(default_factory=list)  # (run_at_ms, id, version)
    running: set[str] = field(default_factory=set)
    # (lease_until_ms, id) of each lease given or renewed: a claim sweeps only the lapsed ones
    leases: list[tuple[int, str]] = field(default_factory=list)


class MemoryJobDriver:
    """Jobs in a dict, with a due heap and a delayed heap per queue; every method is atomic."""

    # Its calls never leave the process: a worker's acks go straight through, unbatched.
    in_process: ClassVar[bool] = True

    def __init__(self, clock: Clock, workers: MemoryWorkerRegistry, wake: WakeSource) -> None:
        self.ledger = MemoryLedger()
        self.listing = ListingIndex()
        self._on_remove: list[Callable[[str], None]] = []
        self._on_settle: list[Callable[[str], None]] = []
        self._clock = clock
        self._workers = workers
        self._wake = wake
        self._rows: dict[str, JobRow] = {}
        self._live: dict[tuple[str, str, str], str] = {}
        # namespace -> (job id, throttle_until_ms) of the last throttled job created in it
        self._throttled: dict[tuple[str, str, str], tuple[str, int]] = {}
        self._queues: dict[str, _Queue] = {}

    # -- bookkeeping -------------------------------------------------------------------------

    def _queue(self, name: str) -> _Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = _Queue()
        return queue

    def _touch(self, row: JobRow, now: int) -> None:
        """Record a change: bump the row's version (stale heap entries die) and re-index it."""
        row.updated_at_ms = now
        self.listing.put(row, now)
        row.version = version = row.version + 1
        queue = self._queues.get(row.queue) or self._queue(row.queue)
        state, job_id = row.state, row.id
        if state == "running":
            queue.running.add(job_id)
        else:
            queue.running.discard(job_id)
        if state in LIVE_STATES:
            self._live[row.namespace] = job_id
        else:
            if self._live.get(row.namespace) == job_id:
                del self._live[row.namespace]
            for listener in self._on_settle:
                listener(job_id)
        if state == "ready" and row.run_at_ms <= now:
            heapq.heappush(queue.due, (row.priority, row.run_at_ms, job_id, version))
        elif state == "ready" or state == "waiting":
            heapq.heappush(queue.delayed, (row.run_at_ms, job_id, version))

    def _fenced(self, claim: Claim) -> JobRow | None:
        row = self._rows.get(claim.job_id)
        if (
            row is None
            or row.state != "running"
            or row.claimed_by != claim.worker_id
            or row.claims != claim.claims
        ):
            return None
        return row

    def holds(self, claim: Claim) -> bool:
        """Whether `claim` still holds its running job (the fence the step store and bus share)."""
        return self._fenced(claim) is not None

    def wake_waiting(self, job_id: str, run_id: str) -> bool:
        """Make a job parked under `run_id` due now (an event's push); answers whether it was waiting."""
        row = self._rows.get(job_id)
        if row is None or row.state != "waiting" or row.run_id != run_id:
            return False
        now = self._clock.now_ms()
        row.run_at_ms = now
        self._touch(row, now)
        self._wake.emit(row.queue)
        return True

    def _flow_holder(self, job: NewJob, namespace: tuple[str, str, str], now: int) -> JobRow | None:
        """The job a debounced or throttled row folds into, changed as the flow says, or `None`.

        Debounce: the namespace's live job, when no claim has taken it yet (ready, claims 0),
        takes the row's input and is due `debounce_ms` from now. Throttle: the namespace's last
        throttled job while its window is open, whatever its state.
        """
        if job.throttle_ms is not None:
            held = self._throttled.get(namespace)
            if held is None:
                return None
            if held[1] <= now:
                del self._throttled[namespace]
                return None
            return self._rows.get(held[0])
        live_id = self._live.get(namespace)
        row = self._rows.get(live_id) if live_id is not None else None
        if row is None or row.state != "ready" or row.claims != 0 or job.debounce_ms is None:
            return None
        row.payload = job.payload
        row.enqueued_by = job.enqueued_by
        row.traceparent = job.traceparent
        row.run_at_ms = now + job.debounce_ms
        self._touch(row, now)
        return row

    # -- the contract ------------------------------------------------------------------------

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        return self.insert(jobs)

    def insert(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """`enqueue`, as one synchronous step (the child store writes a page inside its own)."""
        now = self._clock.now_ms()
        results: list[EnqueueResult] = []
        woken: set[str] = set()
        for job in jobs:
            existing = self._rows.get(job.id)
            if existing is None:
                namespace = (job.name, job.tenant_id or "", job.idempotency_key)
                if job.debounce_ms is not None or job.throttle_ms is not None:
                    existing = self._flow_holder(job, namespace, now)
                if existing is None:
                    live_id = self._live.get(namespace)
                    existing = self._rows.get(live_id) if live_id is not None else None
            if existing is not None:
                results.append(EnqueueResult(existing.id, existing.run_id, deduped=True))
                continue
            row = JobRow.from_new(job, now)
            if job.debounce_ms is not None:
                row.run_at_ms = now + job.debounce_ms
            elif job.throttle_ms is not None:
                self._throttled[row.namespace] = (row.id, now + job.throttle_ms)
            self._rows[row.id] = row
            self._touch(row, now)
            results.append(EnqueueResult(row.id, row.run_id, deduped=False))
            if row.run_at_ms <= now:
                woken.add(row.queue)
        for queue in sorted(woken):
            self._wake.emit(queue)
        return results

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        assert_claim_queues(options)
        now = self._clock.now_ms()
        if options.presence_ttl_ms is not None:
            self._workers.refresh(options.worker_id, options.presence_ttl_ms)
        buried: list[JobRow] = []
        for name in options.queues:
            queue = self._queue(name)
            self._promote_due(queue, now)
            buried.extend(self._sweep_lapsed(queue, now))
        quota = {
            name: limit
            for name, limit in options.queues.items()
            if limit > 0 and not self.ledger.paused("queue", name)
        }
        total = sum(quota.values()) if options.limit is None else options.limit
        claimed: list[ClaimedJob] = []
        skipped: list[tuple[str, _Entry]] = []  # heads of a paused job name, put back after
        queues, rows = self._queues, self._rows
        lease_until = now + options.lease_ms
        while len(claimed) < total and quota:
            # The next job across the asked queues, in claim order: priority, run_at, id.
            best: _Entry | None = None
            queue_name = ""
            for name in list(quota):
                head = self._due_head(queues[name], now)
                if head is None:
                    del quota[name]
                elif best is None or head < best:
                    best, queue_name = head, name
            if best is None:
                break
            queue = queues[queue_name]
            entry = heapq.heappop(queue.due)
            row = rows[entry[2]]
            if self.ledger.paused("job", row.name):
                skipped.append((queue_name, entry))
                continue
            row.state = "running"
            row.attempt += 1
            row.claims += 1
            row.claimed_by = options.worker_id
            row.lease_until_ms = lease_until
            self._touch(row, now)
            self._leased(queue, row)
            claimed.append(row.claimed())
            left = quota[queue_name] - 1
            if left:
                quota[queue_name] = left
            else:
                del quota[queue_name]
        for queue_name, entry in skipped:
            heapq.heappush(queues[queue_name].due, entry)
        return ClaimResult(jobs=tuple(claimed), buried=tuple(r.buried() for r in buried))

    def _leased(self, queue: _Queue, row: JobRow) -> None:
        """Note `row`'s new lease; entries of settled or renewed leases are dropped once they
        outnumber the running jobs."""
        assert row.lease_until_ms is not None
        heapq.heappush(queue.leases, (row.lease_until_ms, row.id))
        if len(queue.leases) > 2 * len(queue.running) + 64:
            held = ((self._rows[i].lease_until_ms, i) for i in queue.running)
            queue.leases = [(at, i) for at, i in held if at is not None]
            heapq.heapify(queue.leases)

    def _sweep_lapsed(self, queue: _Queue, now: int) -> list[JobRow]:
        """Lapsed leases become claimable again, except on the final attempt: those are buried."""
        buried: list[JobRow] = []
        while queue.leases and queue.leases[0][0] <= now:
            at, job_id = heapq.heappop(queue.leases)
            row = self._rows.get(job_id)
            if row is None or row.state != "running" or row.lease_until_ms != at:
                continue  # settled, or renewed: a later entry holds its lease
            if row.attempt >= row.max_attempts:
                row.state = "dead" if row.dead_letter else "failed"
                row.finished_at_ms = now
                row.lease_until_ms = None
                row.last_error = LAPSED_ON_FINAL_ATTEMPT
                self._record_error(row, row.claimed_by, LAPSED_ON_FINAL_ATTEMPT, now)
                self._touch(row, now)
                self.ledger.count(row.name, "dead-lettered" if row.dead_letter else "dropped", now)
                buried.append(row)
            else:
                heapq.heappush(queue.due, (row.priority, row.run_at_ms, row.id, row.version))
        return buried

    def _due_head(self, queue: _Queue, now: int) -> _Entry | None:
        """The first claimable entry of the due heap, dropping stale entries on the way."""
        due, rows = queue.due, self._rows
        while due:
            head = due[0]
            row = rows.get(head[2])
            if row is not None and row.version == head[3]:
                state = row.state
                if state == "ready" or state == "waiting":
                    return head
                if state == "running" and (row.lease_until_ms or 0) <= now:
                    return head  # lapsed
            heapq.heappop(due)
        return None

    def _promote_due(self, queue: _Queue, now: int) -> None:
        while queue.delayed and queue.delayed[0][0] <= now:
            _, job_id, version = heapq.heappop(queue.delayed)
            row = self._rows.get(job_id)
            if row is None or row.version != version:
                continue
            heapq.heappush(queue.due, (row.priority, row.run_at_ms, row.id, version))

    async def ack(self, claim: Claim) -> bool:
        return self.complete(claim, None)

    def complete(self, claim: Claim, result: str | None) -> bool:
        """Settle `completed`, storing the body's result with it (fenced like every settle)."""
        row = self._fenced(claim)
        if row is None:
            return False
        now = self._clock.now_ms()
        row.state = "completed"
        row.finished_at_ms = now
        row.lease_until_ms = None
        row.result = result
        self._touch(row, now)
        self.ledger.count(row.name, "completed", now)
        return True

    def row(self, job_id: str) -> JobRow | None:
        """One row as it is now (the result store reads it)."""
        return self._rows.get(job_id)

    def on_settle(self, listener: Callable[[str], None]) -> None:
        """Call `listener(job_id)` whenever a job reaches a finished state."""
        self._on_settle.append(listener)

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        return [await self.ack(claim) for claim in claims]

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        row = self._fenced(claim)
        if row is None:
            return False
        now = self._clock.now_ms()
        attempt = row.attempt
        if not nack.counts_as_attempt:
            row.attempt = max(row.attempt - 1, 0)
        row.lease_until_ms = None
        row.state = nack.state
        if nack.terminal:
            row.finished_at_ms = now
        else:
            row.run_at_ms = nack.run_at_ms if nack.run_at_ms is not None else now
        if nack.writes_error and nack.error is not None:
            row.last_error = nack.error
            self._record_error(row, claim.worker_id, nack.error, now, attempt)
        self._touch(row, now)
        self.ledger.count(row.name, nack.outcome, now)
        return True

    def _record_error(
        self, row: JobRow, worker_id: str | None, text: str, now: int, attempt: int | None = None
    ) -> None:
        at = row.attempt if attempt is None else attempt
        self.ledger.record_error(AttemptError(row.id, at, worker_id, now, text))

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        row = self._fenced(claim)
        if row is None:
            return False
        now = self._clock.now_ms()
        row.lease_until_ms = now + lease_ms
        row.updated_at_ms = now
        self._leased(self._queue(row.queue), row)
        return True

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        row = self._fenced(claim)
        if row is None:
            return False
        row.progress = progress
        row.updated_at_ms = self._clock.now_ms()
        return True

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        return self.cancel_now(job_id, reason)

    def cancel_now(self, job_id: str, reason: str | None = None) -> JobMove:
        """`cancel`, as one synchronous step (the child store's cascade runs inside the write)."""
        row = self._rows.get(job_id)
        if row is None:
            return JobMove("missing")
        if row.state not in LIVE_STATES:
            return JobMove("finished", state=row.state)
        now = self._clock.now_ms()
        row.state = "cancelled"
        row.finished_at_ms = now
        row.lease_until_ms = None
        row.last_error = f"cancelled: {reason}" if reason else "cancelled"
        self._touch(row, now)
        self.ledger.count(row.name, "cancelled", now)
        return JobMove("done", row.record())

    def _requeueable(self, row: JobRow, taken: set[tuple[str, str, str]]) -> bool:
        return row.namespace not in self._live and row.namespace not in taken

    def _reset(self, row: JobRow, now: int) -> None:
        row.state = "ready"
        row.attempt = 0
        row.run_at_ms = now
        row.claimed_by = None
        row.lease_until_ms = None
        row.finished_at_ms = None
        row.last_error = None
        row.progress = None
        row.result = None
        self._touch(row, now)

    async def requeue(self, job_id: str) -> JobMove:
        row = self._rows.get(job_id)
        if row is None:
            return JobMove("missing")
        if row.state in LIVE_STATES:
            return JobMove("live", state=row.state)
        if not self._requeueable(row, set()):
            return JobMove("duplicate", holder=self._live[row.namespace])
        self._reset(row, self._clock.now_ms())
        return JobMove("done", row.record())

    def retry_many(self, candidates: list[JobRow], limit: int) -> BulkResult:
        """Requeue up to `limit` of `candidates` (oldest first); a row whose namespace a live row
        holds, or an earlier candidate took, is skipped and not counted as remaining."""
        picked: list[JobRow] = []
        taken: set[tuple[str, str, str]] = set()
        for row in candidates:
            if self._requeueable(row, taken):
                taken.add(row.namespace)
                picked.append(row)
        now = self._clock.now_ms()
        for row in picked[:limit]:
            self._reset(row, now)
        if picked[:limit]:
            self._wake.emit(None)
        return BulkResult(moved=len(picked[:limit]), remaining=max(len(picked) - limit, 0))

    def promote(self, job_id: str) -> JobMove:
        """Make a `ready` job due now."""
        row = self._rows.get(job_id)
        if row is None:
            return JobMove("missing")
        if row.state in FINISHED_STATES:
            return JobMove("finished", state=row.state)
        if row.state != "ready":
            return JobMove("live", state=row.state)
        now = self._clock.now_ms()
        row.run_at_ms = min(row.run_at_ms, now)
        self._touch(row, now)
        self._wake.emit(row.queue)
        return JobMove("done", row.record())

    def remove(self, job_id: str) -> JobMove:
        """Delete a finished job (its steps and errors go with it)."""
        row = self._rows.get(job_id)
        if row is None:
            return JobMove("missing")
        if row.state in LIVE_STATES:
            return JobMove("live", state=row.state)
        record = row.record()
        del self._rows[job_id]
        self.listing.drop(row)
        self.ledger.forget(job_id)
        for listener in self._on_remove:
            listener(row.run_id)
        return JobMove("done", record)

    def rows(self) -> list[JobRow]:
        """Every row (the operator surface reads them; it never mutates one directly)."""
        return list(self._rows.values())

    def wake_all(self) -> None:
        """A resumed pause may free work in any queue."""
        self._wake.emit(None)

    def on_remove(self, listener: Callable[[str], None]) -> None:
        """Call `listener(run_id)` when a job is removed (the step store drops its records)."""
        self._on_remove.append(listener)

    async def get(self, job_id: str) -> JobRecord | None:
        row = self._rows.get(job_id)
        return None if row is None else row.record()
