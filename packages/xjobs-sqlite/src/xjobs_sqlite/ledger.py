"""The settles' bookkeeping inside their transaction: attempt errors kept, minute counters bumped."""

from __future__ import annotations

from xjobs.contract.introspection import COUNTED_OUTCOMES
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import sql


def keep_error(
    conn: Connection,
    *,
    job_id: str,
    claims: int,
    attempt: int,
    worker_id: str | None,
    now: int,
    error: str,
) -> None:
    """Store the error of one claim's attempt, keeping the newest `MAX_ERROR_HISTORY` of its job."""
    conn.execute(
        sql("keep_error"),
        {
            "job_id": job_id,
            "claims": claims,
            "attempt": attempt,
            "worker_id": worker_id,
            "now": now,
            "error": error,
        },
    )
    conn.execute(sql("drop_old_errors"), {"job_id": job_id})


def count(conn: Connection, name: str, outcome: str, now: int, n: int = 1) -> None:
    """Bump the minute counter of an ending; an outcome that is not counted adds nothing."""
    if outcome in COUNTED_OUTCOMES and n > 0:
        conn.execute(sql("count_minute"), {"now": now, "name": name, "outcome": outcome, "n": n})
