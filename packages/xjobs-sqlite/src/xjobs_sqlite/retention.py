"""Retention: the purge of finished jobs (with their steps, errors and wait), events, worker rows and
counter buckets, a bounded batch a write transaction, each found by an index walk from the oldest."""

from __future__ import annotations

import heapq
import json

from xjobs.contract.retention import COUNTER_TIERS, RETAINED_STATES, Keep, PurgeCut, PurgeStore
from xjobs_sqlite.bulk import remove
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.events import purge_events
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql

ALL = -1  # a LIMIT of -1 is no limit


def _finished(conn: Connection, cut: PurgeCut, limit: int) -> list[str]:
    """The ids of the oldest `limit` jobs finished before their cut (`ALL`: every one)."""
    own = json.dumps(sorted(cut.job_names))
    walks = [
        conn.execute(
            sql("finished_before"),
            {"state": state, "before": before, "name": None, "own": own, "limit": limit},
        ).fetchall()
        for state, before in cut.jobs.items()
    ]
    walks += [
        conn.execute(
            sql("finished_before"),
            {"state": state, "before": before, "name": name, "own": own, "limit": limit},
        ).fetchall()
        for name, before in cut.job_names.items()
        for state in RETAINED_STATES
    ]
    merged = heapq.merge(*walks, key=lambda row: (row[2], row[0]))
    ids = [str(row[0]) for row in merged]
    return ids if limit == ALL else ids[:limit]


def _purge(conn: Connection, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
    if store == "jobs":
        return sum(remove(conn, job_id).status == "done" for job_id in _finished(conn, cut, limit))
    if store == "events":
        return purge_events(conn, cut.events, limit)
    if store == "workers":
        return conn.execute(sql("purge_workers"), {"before": cut.workers, "limit": limit}).rowcount
    if store == "counters":
        gone = 0
        for tier in COUNTER_TIERS:
            params: dict[str, object] = {
                "tier": tier,
                "before": cut.counters[tier],
                "limit": limit - gone,
            }
            gone += conn.execute(sql("purge_counters"), params).rowcount
        conn.execute(sql("purge_folds"), {"before": cut.counters["minute"]})
        return gone
    params = {"before": cut.outbox, "limit": limit}
    return conn.execute(sql("outbox_purge"), params).rowcount


def _expired(conn: Connection, store: PurgeStore, cut: PurgeCut) -> int:
    if store == "jobs":
        return len(_finished(conn, cut, ALL))
    if store == "events":
        return int(conn.execute(sql("count_events"), {"before": cut.events}).fetchone()[0])
    if store == "workers":
        return int(conn.execute(sql("count_workers"), {"before": cut.workers}).fetchone()[0])
    if store == "counters":
        return sum(
            int(
                conn.execute(
                    sql("count_counters"), {"tier": t, "before": cut.counters[t]}
                ).fetchone()[0]
            )
            for t in COUNTER_TIERS
        )
    return int(conn.execute(sql("outbox_count_published"), {"before": cut.outbox}).fetchone()[0])


class SqliteRetention:
    """`RetentionStore`: deletes only when the purge asks (the policy itself is the purge job's)."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor
        self.policy: Keep | None = None

    def keep(self, policy: Keep | None) -> None:
        """Adopt the app's policy (this backend deletes only when asked)."""
        self.policy = policy

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        """Delete at most `limit` rows of `store` older than `cut`, in one write transaction."""
        return await self._x.write(lambda conn: _purge(conn, store, cut, limit))

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        """How many rows of `store` a purge at `cut` would delete now."""
        return await self._x.read(lambda conn: _expired(conn, store, cut))
