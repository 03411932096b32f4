"""The driver contract's operator moves, cancel and requeue: one fenced update each, and why one missed."""

from __future__ import annotations

from xjobs.contract.driver import JobMove
from xjobs_sqlite import ledger
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.rows import job_record
from xjobs_sqlite.sql import sql


def cancel_error(reason: str | None) -> str:
    """The `last_error` a cancel writes."""
    return f"cancelled: {reason}" if reason else "cancelled"


def _state(conn: Connection, job_id: str) -> str | None:
    row = conn.execute(sql("get_job"), {"id": job_id}).fetchone()
    return None if row is None else str(row[4])


def cancel(conn: Connection, job_id: str, reason: str | None, now: int) -> JobMove:
    """Cancel a live job (counted `cancelled`); `finished` or `missing` otherwise, writing nothing."""
    params = {"id": job_id, "now": now, "error": cancel_error(reason)}
    row = conn.execute(sql("cancel"), params).fetchone()
    if row is not None:
        record = job_record(row)
        ledger.count(conn, record.name, "cancelled", now)
        return JobMove("done", record)
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
