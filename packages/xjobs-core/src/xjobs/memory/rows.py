"""The memory backend's job row and its projection to the wire records."""

from __future__ import annotations

from dataclasses import dataclass, field

from xjobs.contract.driver import BuriedJob, ClaimedJob, JobRecord, JobState, NewJob
from xjobs.contract.introspection import JobSummary


@dataclass(slots=True)
class JobRow:
    """One job as the memory store keeps it; mutated only under the store's lock."""

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    idempotency_key: str
    payload: str
    priority: int
    run_at_ms: int
    max_attempts: int
    dead_letter: bool
    enqueued_by: str | None
    traceparent: str | None
    created_at_ms: int
    updated_at_ms: int
    state: JobState = "ready"
    attempt: int = 0
    claims: int = 0
    claimed_by: str | None = None
    lease_until_ms: int | None = None
    finished_at_ms: int | None = None
    last_error: str | None = None
    progress: float | None = None
    result: str | None = None
    # The idempotency namespace, `(name, coalesce(tenant_id, ''), idempotency_key)`: fixed at
    # creation (none of the three ever changes), so built once.
    namespace: tuple[str, str, str] = field(init=False, repr=False, compare=False)
    # Bumped by each write the driver books: a heap entry carrying an older version is stale.
    version: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.namespace = (self.name, self.tenant_id or "", self.idempotency_key)

    @classmethod
    def from_new(cls, job: NewJob, now_ms: int) -> JobRow:
        return cls(
            id=job.id,
            run_id=job.run_id,
            name=job.name,
            queue=job.queue,
            tenant_id=job.tenant_id,
            idempotency_key=job.idempotency_key,
            payload=job.payload,
            priority=job.priority,
            run_at_ms=job.run_at_ms if job.run_at_ms is not None else now_ms,
            max_attempts=job.max_attempts,
            dead_letter=job.dead_letter,
            enqueued_by=job.enqueued_by,
            traceparent=job.traceparent,
            created_at_ms=now_ms,
            updated_at_ms=now_ms,
        )

    def claimed(self) -> ClaimedJob:
        assert self.claimed_by is not None
        assert self.lease_until_ms is not None
        # positional, in the record's field order (one per claim: keywords cost a dict)
        return ClaimedJob(
            self.id,
            self.run_id,
            self.name,
            self.queue,
            self.tenant_id,
            self.payload,
            self.priority,
            self.attempt,
            self.max_attempts,
            self.dead_letter,
            self.claims,
            self.claimed_by,
            self.lease_until_ms,
            self.enqueued_by,
            self.traceparent,
            self.created_at_ms,
            self.run_at_ms,
        )

    def buried(self) -> BuriedJob:
        assert self.state in ("dead", "failed")
        return BuriedJob(
            id=self.id,
            run_id=self.run_id,
            name=self.name,
            queue=self.queue,
            tenant_id=self.tenant_id,
            payload=self.payload,
            state="dead" if self.state == "dead" else "failed",
            attempt=self.attempt,
        )

    def summary(self) -> JobSummary:
        return JobSummary(
            id=self.id,
            name=self.name,
            queue=self.queue,
            state=self.state,
            tenant_id=self.tenant_id,
            priority=self.priority,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            run_at_ms=self.run_at_ms,
            created_at_ms=self.created_at_ms,
            updated_at_ms=self.updated_at_ms,
            finished_at_ms=self.finished_at_ms,
            claimed_by=self.claimed_by,
            progress=self.progress,
            last_error=self.last_error,
        )

    def record(self) -> JobRecord:
        return JobRecord(
            id=self.id,
            run_id=self.run_id,
            name=self.name,
            queue=self.queue,
            state=self.state,
            tenant_id=self.tenant_id,
            idempotency_key=self.idempotency_key,
            payload=self.payload,
            priority=self.priority,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            dead_letter=self.dead_letter,
            claims=self.claims,
            claimed_by=self.claimed_by,
            lease_until_ms=self.lease_until_ms,
            run_at_ms=self.run_at_ms,
            created_at_ms=self.created_at_ms,
            updated_at_ms=self.updated_at_ms,
            finished_at_ms=self.finished_at_ms,
            last_error=self.last_error,
            progress=self.progress,
            enqueued_by=self.enqueued_by,
            traceparent=self.traceparent,
        )
