"""The operator's reads: list pages, bulk batches and queue counts, one queue and state at a time.

Each read walks `jobs_listed` (queue, state, created_at, id) for each known queue and asked
state, at most a page (or a batch and `COUNT_CAP` beyond it) each, and merges the walks here, in
one read snapshot: the cost of a page does not grow with the table.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from xjobs.contract.driver import JOB_STATES
from xjobs.contract.introspection import COUNT_CAP, JobFilter, JobPosition, JobSummary, QueueCounts
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import sql

Row = tuple[Any, ...]


def known_queues(conn: Connection) -> list[str]:
    """Every queue with a job or a pause, by name."""
    return [str(row[0]) for row in conn.execute(sql("known_queues"))]


def _queues(conn: Connection, where: JobFilter) -> list[str]:
    return known_queues(conn) if where.queue is None else [where.queue]


def _filter(where: JobFilter) -> dict[str, object]:
    return {
        "name": where.name,
        "tenant": where.tenant,
        "created_after_ms": where.created_after_ms,
        "created_before_ms": where.created_before_ms,
    }


def list_page(
    conn: Connection, where: JobFilter, limit: int, after: JobPosition | None
) -> list[JobSummary]:
    """Up to `limit` jobs matching `where`, newest first, strictly older than `after`."""
    params: dict[str, object] = {
        **_filter(where),
        "before_ms": None if after is None else after.created_at_ms,
        "before_id": None if after is None else after.id,
        "limit": limit,
    }
    walks = [
        conn.execute(sql("list_newest"), {**params, "queue": queue, "state": state}).fetchall()
        for queue in _queues(conn, where)
        for state in where.states or JOB_STATES
    ]
    merged = heapq.merge(*walks, key=lambda row: (row[9], row[0]), reverse=True)
    return [JobSummary(*row) for _, row in zip(range(limit), merged, strict=False)]


def oldest_first(
    conn: Connection,
    where: JobFilter,
    states: Iterable[str],
    limit: int,
    due_after: int | None = None,
) -> list[Row]:
    """The oldest `limit` matching rows (id, created_at, name, tenant, key, run_at) of `states`,
    and up to `COUNT_CAP` beyond them; `due_after` keeps those due later only."""
    params = {**_filter(where), "due_after": due_after, "limit": limit + COUNT_CAP}
    walks = [
        conn.execute(sql("list_oldest"), {**params, "queue": queue, "state": state}).fetchall()
        for queue in _queues(conn, where)
        for state in states
    ]
    merged = heapq.merge(*walks, key=lambda row: (row[1], row[0]))
    return [row for _, row in zip(range(limit + COUNT_CAP), merged, strict=False)]


def _count(conn: Connection, statement: str, params: dict[str, object]) -> int:
    return int(conn.execute(sql(statement), {**params, "cap": COUNT_CAP}).fetchone()[0])


def queue_counts(conn: Connection, now_ms: int) -> list[QueueCounts]:
    """Every known queue's bounded counts as of `now_ms`, by name."""
    paused = {
        str(row[1]) for row in conn.execute(sql("pause_rows")).fetchall() if row[0] == "queue"
    }
    out: list[QueueCounts] = []
    for queue in known_queues(conn):
        at = {"queue": queue, "now": now_ms}

        def count(state: str, at: dict[str, object] = at) -> int:
            return _count(conn, "count_state", {**at, "state": state})

        scheduled = _count(conn, "count_scheduled", at)
        (oldest,) = conn.execute(sql("oldest_due"), at).fetchone()
        out.append(
            QueueCounts(
                queue=queue,
                ready=_count(conn, "count_due", at),
                scheduled=scheduled,
                running=count("running"),
                waiting=count("waiting"),
                dead=count("dead"),
                failed=count("failed"),
                oldest_ready_ms=None if oldest is None else int(oldest),
                paused=queue in paused,
            )
        )
    return out
