"""The enqueue of a batch: one `BEGIN IMMEDIATE` transaction, each row placed or answered by its holder.

Under the file's write lock no other writer runs between a row's lookups and its insert, so a row
is inserted at most once, and a live namespace seen empty stays empty until the insert.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.errors import BackendError
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import sql


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What a batch's transaction answers: a result per row, and the queues a new row is due in."""

    results: list[EnqueueResult]
    due_queues: frozenset[str]


def enqueue_rows(conn: Connection, jobs: Sequence[NewJob], now: int) -> Enqueued:
    """Place each row in order (inside the caller's transaction)."""
    results: list[EnqueueResult] = []
    due: set[str] = set()
    for job in jobs:
        result, run_at = _place(conn, job, now)
        results.append(result)
        if not result.deduped and run_at <= now:
            due.add(job.queue)
    return Enqueued(results, frozenset(due))


def _namespace(job: NewJob) -> dict[str, object]:
    return {"name": job.name, "tenant_id": job.tenant_id, "idempotency_key": job.idempotency_key}


def _held(row: tuple[str, str] | None) -> EnqueueResult | None:
    return None if row is None else EnqueueResult(str(row[0]), str(row[1]), deduped=True)


def _flow_holder(conn: Connection, job: NewJob, now: int) -> EnqueueResult | None:
    """The job a throttled or debounced row folds into (a debounce moves it), or `None`."""
    if job.throttle_ms is not None:
        params = {**_namespace(job), "now": now}
        return _held(conn.execute(sql("throttled_in_namespace"), params).fetchone())
    if job.debounce_ms is not None:
        params = {
            **_namespace(job),
            "now": now,
            "debounce_ms": job.debounce_ms,
            "payload": job.payload,
            "enqueued_by": job.enqueued_by,
            "traceparent": job.traceparent,
        }
        return _held(conn.execute(sql("debounce_live"), params).fetchone())
    return None


def _place(conn: Connection, job: NewJob, now: int) -> tuple[EnqueueResult, int]:
    """Answer a row: the job its id names, the flow's holder, a new row, or the namespace's live job.

    A row with no flow (no throttle, no debounce) tries its insert first: the insert lands
    unless its id or its live namespace is held (the unique indexes arbitrate), and only then
    are the holders read, so a new row costs one statement, not two.
    """
    flowing = job.throttle_ms is not None or job.debounce_ms is not None
    if flowing:
        by_id = _held(conn.execute(sql("job_by_id"), {"id": job.id}).fetchone())
        if by_id is not None:
            return by_id, now
        flow = _flow_holder(conn, job, now)
        if flow is not None:
            return flow, now
    if job.debounce_ms is not None:
        run_at = now + job.debounce_ms
    else:
        run_at = job.run_at_ms if job.run_at_ms is not None else now
    params = {
        "id": job.id,
        "run_id": job.run_id,
        **_namespace(job),
        "queue": job.queue,
        "payload": job.payload,
        "priority": job.priority,
        "run_at_ms": run_at,
        "max_attempts": job.max_attempts,
        "dead_letter": 1 if job.dead_letter else 0,
        "enqueued_by": job.enqueued_by,
        "traceparent": job.traceparent,
        "now": now,
        "throttle_until_ms": None if job.throttle_ms is None else now + job.throttle_ms,
    }
    if conn.execute(sql("insert_job"), params).fetchone() is not None:
        return EnqueueResult(job.id, job.run_id, deduped=False), run_at
    if not flowing:
        by_id = _held(conn.execute(sql("job_by_id"), {"id": job.id}).fetchone())
        if by_id is not None:
            return by_id, now
    live = _held(conn.execute(sql("live_in_namespace"), _namespace(job)).fetchone())
    if live is None:
        raise BackendError(
            f"enqueue could not place job {job.id}: no row holds its id or namespace"
        )
    return live, run_at
