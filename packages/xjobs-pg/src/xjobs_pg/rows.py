"""Postgres rows to wire records."""

from __future__ import annotations

from typing import Any

import asyncpg

from xjobs.contract.driver import BuriedJob, ClaimedJob, JobRecord, NewJob


def _str(value: Any) -> str:
    return str(value)


def claimed_job(row: asyncpg.Record, worker_id: str) -> ClaimedJob:
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
    )


def buried_job(row: asyncpg.Record) -> BuriedJob:
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
