"""Postgres rows to wire records."""

from __future__ import annotations

from typing import Any

import asyncpg

from xjobs.contract.driver import BuriedJob, ClaimedJob, JobRecord, NewJob
from xjobs.contract.introspection import AttemptError, CounterBucket, CounterTier, JobSummary


def _str(value: Any) -> str:
    return str(value)


def claimed_job(row: asyncpg.Record, worker_id: str) -> ClaimedJob:
    """A claim row as the job the worker now holds."""
    return ClaimedJob(
        id=_str(row["id"]),
        run_id=_str(row["run_id"]),
        name=row["name"],
        queue=row["queue"],
        tenant_id=row["tenant_id"],
        payload=row["payload"],
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        dead_letter=row["dead_letter"],
        claims=row["claims"],
        worker_id=worker_id,
        lease_until_ms=row["lease_until_ms"],
        enqueued_by=row["enqueued_by"],
        traceparent=row["traceparent"],
        created_at_ms=row["created_at_ms"],
        due_at_ms=row["run_at_ms"],
    )


def buried_job(row: asyncpg.Record) -> BuriedJob:
    """A claim row the claim buried (its lease lapsed on the final attempt)."""
    return BuriedJob(
        id=_str(row["id"]),
        run_id=_str(row["run_id"]),
        name=row["name"],
        queue=row["queue"],
        tenant_id=row["tenant_id"],
        payload=row["payload"],
        state="dead" if row["state"] == "dead" else "failed",
        attempt=row["attempt"],
    )


def job_record(row: asyncpg.Record) -> JobRecord:
    """A whole job row (get, and the moves that answer the record)."""
    return JobRecord(
        id=_str(row["id"]),
        run_id=_str(row["run_id"]),
        name=row["name"],
        queue=row["queue"],
        state=row["state"],
        tenant_id=row["tenant_id"],
        idempotency_key=row["idempotency_key"],
        payload=row["payload"],
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        dead_letter=row["dead_letter"],
        claims=row["claims"],
        claimed_by=row["claimed_by"],
        lease_until_ms=row["lease_until_ms"],
        run_at_ms=row["run_at_ms"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        finished_at_ms=row["finished_at_ms"],
        last_error=row["last_error"],
        progress=row["progress"],
        enqueued_by=row["enqueued_by"],
        traceparent=row["traceparent"],
    )


def new_job(row: asyncpg.Record) -> NewJob:
    """An outbox row as the `NewJob` it stages (the relay publishes it as is)."""
    return NewJob(
        id=_str(row["id"]),
        run_id=_str(row["run_id"]),
        name=row["name"],
        queue=row["queue"],
        tenant_id=row["tenant_id"],
        idempotency_key=row["idempotency_key"],
        payload=row["payload"],
        priority=row["priority"],
        run_at_ms=row["run_at_ms"],
        max_attempts=row["max_attempts"],
        dead_letter=row["dead_letter"],
        enqueued_by=row["enqueued_by"],
        traceparent=row["traceparent"],
    )


def job_summary(row: asyncpg.Record) -> JobSummary:
    """A `list_jobs` row as a list shows it (no payload)."""
    return JobSummary(
        id=_str(row["id"]),
        name=row["name"],
        queue=row["queue"],
        state=row["state"],
        tenant_id=row["tenant_id"],
        priority=row["priority"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        run_at_ms=row["run_at_ms"],
        created_at_ms=row["created_at_ms"],
        updated_at_ms=row["updated_at_ms"],
        finished_at_ms=row["finished_at_ms"],
        claimed_by=row["claimed_by"],
        progress=row["progress"],
        last_error=row["last_error"],
    )


def attempt_error(row: asyncpg.Record) -> AttemptError:
    """A stored attempt error."""
    return AttemptError(
        job_id=_str(row["job_id"]),
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        at_ms=row["at_ms"],
        text=row["error"],
    )


def counter_bucket(tier: CounterTier, row: asyncpg.Record) -> CounterBucket:
    """A counter row of `tier`, its shards summed."""
    return CounterBucket(
        tier=tier,
        bucket_ms=row["bucket_ms"],
        name=row["name"],
        outcome=row["outcome"],
        count=row["count"],
    )
