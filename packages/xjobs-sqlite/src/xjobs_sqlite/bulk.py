"""The operator's moves beyond the driver contract, each in one write transaction: promote, remove,
and the bulk verbs, whose batch is read oldest first in the transaction that moves it."""

from __future__ import annotations

from xjobs.contract.driver import FINISHED_STATES, LIVE_STATES, BulkResult, JobMove
from xjobs.contract.introspection import DAY_MS, HOUR_MS, JobFilter, bucket_of, only_states
from xjobs_sqlite import moves
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.listing import Row, oldest_first
from xjobs_sqlite.rows import job_record
from xjobs_sqlite.sql import sql


def _moved(rows: list[Row], limit: int) -> BulkResult:
    return BulkResult(moved=min(len(rows), limit), remaining=max(len(rows) - limit, 0))


def _state(conn: Connection, job_id: str) -> str | None:
    row = conn.execute(sql("get_job"), {"id": job_id}).fetchone()
    return None if row is None else str(row[4])


def promote(conn: Connection, job_id: str, now: int) -> JobMove:
    """A `ready` job due now; `live`, `finished` or `missing` otherwise."""
    row = conn.execute(sql("promote"), {"id": job_id, "now": now}).fetchone()
    if row is not None:
        return JobMove("done", job_record(row))
    state = _state(conn, job_id)
    if state is None:
        return JobMove("missing")
    return JobMove("finished" if state in FINISHED_STATES else "live", state=state)


def remove(conn: Connection, job_id: str) -> JobMove:
    """Delete a finished job with its steps, errors and the child groups its run spawned; `live`
    or `missing` otherwise."""
    row = conn.execute(sql("remove"), {"id": job_id}).fetchone()
    if row is None:
        state = _state(conn, job_id)
        return JobMove("missing") if state is None else JobMove("live", state=state)
    record = job_record(row)
    conn.execute(sql("remove_steps"), {"run_id": record.run_id})
    conn.execute(sql("remove_wait"), {"run_id": record.run_id})
    conn.execute(sql("remove_errors"), {"job_id": record.id})
    conn.execute(sql("remove_groups"), {"run_id": record.run_id})
    return JobMove("done", record)


def cancel_many(
    conn: Connection, where: JobFilter, limit: int, reason: str | None, now: int
) -> tuple[BulkResult, list[str]]:
    """Cancel the oldest `limit` matching live jobs; the result, and the ids cancelled."""
    rows = oldest_first(conn, where, only_states(where, sorted(LIVE_STATES)), limit)
    done = [
        str(r[0]) for r in rows[:limit] if moves.cancel(conn, r[0], reason, now).status == "done"
    ]
    return _moved(rows, limit), done


def promote_many(
    conn: Connection, where: JobFilter, limit: int, now: int
) -> tuple[BulkResult, set[str]]:
    """Make the oldest `limit` matching ready jobs due later due now; the result and their queues."""
    if where.states and "ready" not in where.states:
        return BulkResult(moved=0, remaining=0), set()
    rows = oldest_first(conn, where, ("ready",), limit, due_after=now)
    queues = set()
    for row in rows[:limit]:
        move = promote(conn, row[0], now)
        if move.record is not None:
            queues.add(move.record.queue)
    return _moved(rows, limit), queues


def remove_many(conn: Connection, where: JobFilter, limit: int) -> BulkResult:
    """Delete the oldest `limit` matching finished jobs with their steps and errors."""
    rows = oldest_first(conn, where, only_states(where, sorted(FINISHED_STATES)), limit)
    for row in rows[:limit]:
        remove(conn, row[0])
    return _moved(rows, limit)


def retry_many(conn: Connection, where: JobFilter, limit: int, now: int) -> BulkResult:
    """Requeue the oldest `limit` matching finished jobs; one whose namespace a live row holds, or
    an earlier candidate took, is skipped and not counted as remaining."""
    rows = oldest_first(conn, where, only_states(where, sorted(FINISHED_STATES)), limit)
    taken: set[tuple[str, str, str]] = set()
    picked: list[Row] = []
    for row in rows:
        namespace = (str(row[2]), str(row[3] or ""), str(row[4]))
        if namespace in taken:
            continue
        live = conn.execute(
            sql("live_in_namespace"),
            {"name": row[2], "tenant_id": row[3], "idempotency_key": row[4]},
        ).fetchone()
        if live is None:
            taken.add(namespace)
            picked.append(row)
    for row in picked[:limit]:
        moves.requeue(conn, row[0], now)
    return BulkResult(moved=len(picked[:limit]), remaining=max(len(picked) - limit, 0))


def rollup(conn: Connection, now: int) -> int:
    """Fold every closed, unfolded minute bucket into its hour and day, once; how many it folded."""
    buckets = [
        int(r[0]) for r in conn.execute(sql("unfolded_minutes"), {"current": bucket_of(now)})
    ]
    for bucket in buckets:
        for tier, size in (("hour", HOUR_MS), ("day", DAY_MS)):
            conn.execute(sql("fold_minute"), {"tier": tier, "size": size, "bucket": bucket})
        conn.execute(sql("mark_folded"), {"bucket": bucket, "now": now})
    return len(buckets)
