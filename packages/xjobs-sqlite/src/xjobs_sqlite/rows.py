"""SQLite rows (tuples in the column order of their statement) to wire records."""

from __future__ import annotations

from typing import Any

from xjobs.contract.driver import BuriedJob, ClaimedJob, JobRecord

Row = tuple[Any, ...]


def claimed_job(row: Row, worker_id: str) -> ClaimedJob:
    """A row of the claim's `returning` list as the job the worker now holds."""
    (
        id_,
        run_id,
        name,
        queue,
        tenant_id,
        payload,
        priority,
        attempt,
        max_attempts,
        dead_letter,
        claims,
        lease_until_ms,
        enqueued_by,
        traceparent,
        created_at_ms,
        run_at_ms,
    ) = row
    return ClaimedJob(
        id_,
        run_id,
        name,
        queue,
        tenant_id,
        payload,
        priority,
        attempt,
        max_attempts,
        bool(dead_letter),
        claims,
        worker_id,
        lease_until_ms,
        enqueued_by,
        traceparent,
        created_at_ms,
        run_at_ms,
    )


def buried_job(row: Row) -> BuriedJob:
    """A row of `bury_lapsed`'s `returning` list."""
    id_, run_id, name, queue, tenant_id, payload, state, attempt = row[:8]
    return BuriedJob(
        id=id_,
        run_id=run_id,
        name=name,
        queue=queue,
        tenant_id=tenant_id,
        payload=payload,
        state="dead" if state == "dead" else "failed",
        attempt=attempt,
    )


def job_record(row: Row) -> JobRecord:
    """A whole job row, in the column order of `get_job` (and the moves that answer a record)."""
    (
        id_,
        run_id,
        name,
        queue,
        state,
        tenant_id,
        idempotency_key,
        payload,
        priority,
        attempt,
        max_attempts,
        dead_letter,
        claims,
        claimed_by,
        lease_until_ms,
        run_at_ms,
        created_at_ms,
        updated_at_ms,
        finished_at_ms,
        last_error,
        progress,
        enqueued_by,
        traceparent,
    ) = row
    return JobRecord(
        id=id_,
        run_id=run_id,
        name=name,
        queue=queue,
        state=state,
        tenant_id=tenant_id,
        idempotency_key=idempotency_key,
        payload=payload,
        priority=priority,
        attempt=attempt,
        max_attempts=max_attempts,
        dead_letter=bool(dead_letter),
        claims=claims,
        claimed_by=claimed_by,
        lease_until_ms=lease_until_ms,
        run_at_ms=run_at_ms,
        created_at_ms=created_at_ms,
        updated_at_ms=updated_at_ms,
        finished_at_ms=finished_at_ms,
        last_error=last_error,
        progress=progress,
        enqueued_by=enqueued_by,
        traceparent=traceparent,
    )
