"""The settles of a run, each fenced on `state = 'running'` and the claim, with its bookkeeping."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from xjobs.contract.driver import Claim, Nack
from xjobs_sqlite import children_endings, ledger
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import sql


def _fence(claim: Claim) -> dict[str, object]:
    return {"job_id": claim.job_id, "worker_id": claim.worker_id, "claims": claim.claims}


def complete(conn: Connection, claim: Claim, now: int, result: str | None) -> bool:
    """Settle `completed` with the body's result (`None`: none) and count it; whether it landed."""
    row = conn.execute(sql("ack"), {**_fence(claim), "now": now, "result": result}).fetchone()
    if row is None:
        return False
    ledger.count(conn, row[0], "completed", now)
    if row[1] is not None:
        children_endings.ended(conn, [claim.job_id], now)
    return True


def complete_many(conn: Connection, claims: Sequence[Claim], now: int) -> list[bool]:
    """`complete` of each claim (no result) in ONE statement, counted by name; in order, whether
    each landed (a claim the batch names twice lands once)."""
    fences = json.dumps([[c.job_id, c.worker_id, c.claims] for c in claims])
    rows = conn.execute(sql("ack_many"), {"claims": fences, "now": now}).fetchall()
    for name, n in Counter(str(row[1]) for row in rows).items():
        ledger.count(conn, name, "completed", now, n)
    kids = [str(row[0]) for row in rows if row[2] is not None]
    if kids:
        children_endings.ended(conn, kids, now)
    landed = {str(row[0]) for row in rows}
    out: list[bool] = []
    for claim in claims:
        out.append(claim.job_id in landed)
        landed.discard(claim.job_id)
    return out


def nack(conn: Connection, claim: Claim, settle: Nack, now: int) -> bool:
    """Store the settle room's `Nack` as handed, its error and its counter; whether it landed."""
    params = {
        **_fence(claim),
        "now": now,
        "state": settle.state,
        "terminal": settle.terminal,
        "run_at_ms": settle.run_at_ms,
        "handback": 0 if settle.counts_as_attempt else 1,
        "writes_error": settle.writes_error,
        "error": settle.error,
    }
    row = conn.execute(sql("nack"), params).fetchone()
    if row is None:
        return False
    name, attempt = row
    if settle.writes_error and settle.error is not None:
        ledger.keep_error(
            conn,
            job_id=claim.job_id,
            claims=claim.claims,
            attempt=attempt,
            worker_id=claim.worker_id,
            now=now,
            error=settle.error,
        )
    ledger.count(conn, name, settle.outcome, now)
    if settle.terminal:
        children_endings.ended(conn, [claim.job_id], now)
    return True


def heartbeat(conn: Connection, claim: Claim, lease_ms: int, now: int) -> bool:
    """Extend the lease `lease_ms` from now; whether the fence held."""
    cursor = conn.execute(sql("heartbeat"), {**_fence(claim), "now": now, "lease_ms": lease_ms})
    return cursor.rowcount == 1


def record_progress(conn: Connection, claim: Claim, progress: float, now: int) -> bool:
    """Store the run's progress; whether the fence held."""
    params = {**_fence(claim), "now": now, "progress": progress}
    return conn.execute(sql("record_progress"), params).rowcount == 1
