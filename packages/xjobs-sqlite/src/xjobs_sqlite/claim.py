"""The claim pass: bury exhausted lapsed leases, then claim in ONE update that sets lease and fence."""

from __future__ import annotations

import json
from functools import cache

from xjobs.contract.driver import (
    LAPSED_ON_FINAL_ATTEMPT,
    BuriedJob,
    ClaimedJob,
    ClaimOptions,
    ClaimResult,
)
from xjobs_sqlite import children_endings, ledger
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.rows import buried_job, claimed_job
from xjobs_sqlite.sql import sql


@cache
def claim_statement(queues: int) -> str:
    """The claim over `queues` queues: a `claim_queue` block each (its parameters numbered), one update.

    SQLite's LIMIT cannot read a column of an outer query, so each queue's scan is its own block
    with its own bound limit; only the block count shapes the text, never a value.
    """
    blocks = [
        sql("claim_queue").replace(":queue_N", f":queue_{i}").replace(":limit_N", f":limit_{i}")
        for i in range(queues)
    ]
    return f"{sql('claim_head')}\n{' union all '.join(blocks)}\n{sql('claim_tail')}"


def _buried(conn: Connection, options: ClaimOptions, now: int) -> list[BuriedJob]:
    """Settle each exhausted lapsed lease of the asked queues, with its error and its counter."""
    params = {
        "now": now,
        "queues": json.dumps(list(options.queues)),
        "error": LAPSED_ON_FINAL_ATTEMPT,
    }
    rows = conn.execute(sql("bury_lapsed"), params).fetchall()
    for row in rows:
        state, attempt, claims, claimed_by = row[6], row[7], row[8], row[9]
        ledger.keep_error(
            conn,
            job_id=row[0],
            claims=claims,
            attempt=attempt,
            worker_id=claimed_by,
            now=now,
            error=LAPSED_ON_FINAL_ATTEMPT,
        )
        ledger.count(conn, row[2], "dead-lettered" if state == "dead" else "dropped", now)
    if rows:
        children_endings.ended(conn, [str(row[0]) for row in rows], now)
    return [buried_job(row) for row in rows]


def _claimed(conn: Connection, options: ClaimOptions, now: int) -> list[ClaimedJob]:
    asked = [(queue, limit) for queue, limit in options.queues.items() if limit > 0]
    total = sum(limit for _, limit in asked) if options.limit is None else options.limit
    if not asked or total <= 0:
        return []
    params: dict[str, object] = {
        "now": now,
        "worker_id": options.worker_id,
        "lease_ms": options.lease_ms,
        "total": total,
    }
    for i, (queue, limit) in enumerate(asked):
        params[f"queue_{i}"] = queue
        params[f"limit_{i}"] = limit
    rows = conn.execute(claim_statement(len(asked)), params).fetchall()
    jobs = [claimed_job(row, options.worker_id) for row in rows]
    # RETURNING answers in no promised order: hand the jobs out in claim order.
    jobs.sort(key=lambda job: (job.priority, job.due_at_ms or 0, job.id))
    return jobs


def claim_pass(conn: Connection, options: ClaimOptions, now: int) -> ClaimResult:
    """One pass in the caller's transaction: the presence, the burials, then the claim itself."""
    if options.presence_ttl_ms is not None:
        conn.execute(
            sql("refresh_presence"),
            {
                "now": now,
                "presence_ttl_ms": options.presence_ttl_ms,
                "worker_id": options.worker_id,
            },
        )
    buried = _buried(conn, options, now)
    return ClaimResult(jobs=tuple(_claimed(conn, options, now)), buried=tuple(buried))
