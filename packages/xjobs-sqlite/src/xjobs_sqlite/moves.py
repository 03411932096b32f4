"""The driver contract's operator moves, cancel and requeue: one fenced update each, and why one missed."""

from __future__ import annotations

from xjobs.contract.driver import JobMove
from xjobs_sqlite import children_endings, ledger
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.rows import Row, job_record
from xjobs_sqlite.sql import sql

PARENT_CANCELLED = "parent cancelled"
"""The cancel reason of a descendant a cancel takes along."""


def cancel_error(reason: str | None) -> str:
    """The `last_error` a cancel writes."""
    return f"cancelled: {reason}" if reason else "cancelled"


def _state(conn: Connection, job_id: str) -> str | None:
    row = conn.execute(sql("get_job"), {"id": job_id}).fetchone()
    return None if row is None else str(row[4])


def _cancel_one(conn: Connection, job_id: str, error: str, now: int) -> Row | None:
    """Cancel one live job (counted `cancelled`, counted into its group when a child)."""
    params = {"id": job_id, "now": now, "error": error}
    row: Row | None = conn.execute(sql("cancel"), params).fetchone()
    if row is not None:
        ledger.count(conn, str(row[2]), "cancelled", now)
        children_endings.ended(conn, [job_id], now)
    return row


def _cancel_tree(
    conn: Connection, job_id: str, reason: str | None, now: int
) -> tuple[Row | None, int]:
    """Cancel a live job and its live descendants that are not detached: the job's row (`None`:
    it was not live, nothing written) and how many jobs moved."""
    row = _cancel_one(conn, job_id, cancel_error(reason), now)
    if row is None:
        return None, 0
    kids = children_endings.descendants(conn, job_id)
    error = cancel_error(PARENT_CANCELLED)
    return row, 1 + sum(_cancel_one(conn, kid, error, now) is not None for kid in kids)


def cancel_tree(conn: Connection, job_id: str, reason: str | None, now: int) -> int:
    """Cancel a live job and its live non-detached descendants; how many moved."""
    return _cancel_tree(conn, job_id, reason, now)[1]


def cancel(conn: Connection, job_id: str, reason: str | None, now: int) -> JobMove:
    """Cancel a live job (counted `cancelled`) and its live non-detached descendants; `finished` or
    `missing` otherwise, writing nothing."""
    row, _ = _cancel_tree(conn, job_id, reason, now)
    if row is not None:
        return JobMove("done", job_record(row))
    state = _state(conn, job_id)
    return JobMove("missing") if state is None else JobMove("finished", state=state)


def requeue(conn: Connection, job_id: str, now: int) -> JobMove:
    """A finished job back to ready in one update; `missing`, `live` or `duplicate` otherwise."""
    row = conn.execute(sql("requeue"), {"id": job_id, "now": now}).fetchone()
    if row is not None:
        return JobMove("done", job_record(row))
    state = _state(conn, job_id)
    if state is None:
        return JobMove("missing")
    if state in ("ready", "running", "waiting"):
        return JobMove("live", state=state)
    holder = conn.execute(sql("live_holder"), {"id": job_id}).fetchone()
    return JobMove("duplicate", holder=None if holder is None else str(holder[0]))
