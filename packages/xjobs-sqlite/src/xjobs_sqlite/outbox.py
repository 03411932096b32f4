"""The outbox: rows staged on the caller's own `sqlite3` connection inside its transaction, leased and
marked by relays on the writer."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from typing import Final

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.contract.stores import OUTBOX_WAKE
from xjobs.errors import OutboxConnectionInvalidError
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.errors import interpret_error
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql

OUTBOX_RETENTION_MS: Final = 7 * 24 * 3_600_000  # a published row kept before a mark purges it
OUTBOX_PURGE_LIMIT: Final = 1_000  # the most published rows one mark deletes


def _stage_params(row: NewJob, now: int) -> dict[str, object]:
    return {
        "id": row.id,
        "run_id": row.run_id,
        "name": row.name,
        "queue": row.queue,
        "tenant_id": row.tenant_id,
        "idempotency_key": row.idempotency_key,
        "payload": row.payload,
        "priority": row.priority,
        "run_at_ms": row.run_at_ms,
        "max_attempts": row.max_attempts,
        "dead_letter": 1 if row.dead_letter else 0,
        "enqueued_by": row.enqueued_by,
        "traceparent": row.traceparent,
        "now": now,
    }


def _stage(conn: Connection, rows: Sequence[NewJob], now: int) -> list[EnqueueResult]:
    conn.executemany(sql("outbox_stage"), [_stage_params(row, now) for row in rows])
    return [EnqueueResult(job_id=row.id, run_id=row.run_id, deduped=False) for row in rows]


def _new_job(row: tuple[object, ...]) -> NewJob:
    return NewJob(
        id=str(row[0]),
        run_id=str(row[1]),
        name=str(row[2]),
        queue=str(row[3]),
        tenant_id=None if row[4] is None else str(row[4]),
        idempotency_key=str(row[5]),
        payload=str(row[6]),
        priority=int(str(row[7])),
        run_at_ms=None if row[8] is None else int(str(row[8])),
        max_attempts=int(str(row[9])),
        dead_letter=bool(row[10]),
        enqueued_by=None if row[11] is None else str(row[11]),
        traceparent=None if row[12] is None else str(row[12]),
    )


def _main_file(conn: sqlite3.Connection) -> str:
    """The file of a connection's main database ('' for an in-memory or temporary one)."""
    for _seq, name, file in conn.execute("pragma database_list"):
        if name == "main":
            return str(file or "")
    return ""


class SqliteOutboxStore:
    """`OutboxStore` over `outbox`: a published row is marked, then purged after retention."""

    def __init__(self, executor: Executor, wake: WakeSource) -> None:
        self._x = executor
        self._wake = wake

    def stage_on(self, conn: object, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        """Insert `rows` on the caller's own `sqlite3.Connection` to this backend's file, inside
        its transaction: they commit or roll back with it (nothing is committed here)."""
        if not isinstance(conn, sqlite3.Connection):
            kind = f"{type(conn).__module__}.{type(conn).__qualname__}"
            raise OutboxConnectionInvalidError(
                "the SQLite outbox stages on a sqlite3.Connection to the backend's file, inside "
                f"your transaction; got {kind}"
            )
        try:
            file = _main_file(conn)
            if not file or not os.path.samefile(file, self._x.target.path):
                raise OutboxConnectionInvalidError(
                    f"the SQLite outbox stages on a connection to {self._x.target.path}; this "
                    f"connection's database is {file or 'in memory'}"
                )
            return _stage(conn, rows, self._x.now()) if rows else []
        except sqlite3.Error as exc:
            raise interpret_error(exc) from exc

    async def stage(self, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        """Stage `rows` in a write transaction of the backend's own."""
        now = self._x.now()
        results = await self._x.write(lambda conn: _stage(conn, rows, now))
        # A stage on the caller's connection is another connection's commit: the data_version
        # poll sees it. This one is the writer's own, so its relay is told here.
        if any(row.run_at_ms is None or row.run_at_ms <= now for row in rows):
            self._wake.emit(OUTBOX_WAKE)
        return results

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        """Lease up to `limit` free or lapsed unpublished rows, oldest staged first."""
        if limit <= 0:
            return []
        params = {"relay_id": relay_id, "limit": limit, "lease_ms": lease_ms, "now": self._x.now()}
        rows = await self._x.write(
            lambda conn: conn.execute(sql("outbox_claim"), params).fetchall()
        )
        rows.sort(key=lambda row: (row[13], row[0]))
        return [_new_job(row) for row in rows]

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        """Mark the rows of `ids` this relay still holds; purge old published rows beside it."""
        if not ids:
            return 0
        now = self._x.now()
        params = {"relay_id": relay_id, "ids": json.dumps(list(dict.fromkeys(ids))), "now": now}

        def mark(conn: Connection) -> int:
            marked = conn.execute(sql("outbox_mark"), params).rowcount
            purge = {"before": now - OUTBOX_RETENTION_MS, "limit": OUTBOX_PURGE_LIMIT}
            conn.execute(sql("outbox_purge"), purge)
            return marked

        return await self._x.write(mark)

    async def pending(self) -> int:
        """How many staged rows are not yet published."""
        row = await self._x.read(lambda conn: conn.execute(sql("outbox_pending")).fetchone())
        return int(row[0])
