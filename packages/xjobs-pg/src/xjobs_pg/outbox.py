"""The Postgres outbox: `<schema>.outbox`, staged on the caller's own connection, leased and marked by relays."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from typing import Any

import asyncpg
import psycopg
from asyncpg.pool import PoolConnectionProxy

from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.contract.stores import OUTBOX_WAKE
from xjobs.errors import OutboxConnectionInvalidError, XJobsError
from xjobs.options import finite_count
from xjobs_pg.errors import interpret_error
from xjobs_pg.executor import Executor
from xjobs_pg.params import MarkParams, RelayClaimParams, StageParams
from xjobs_pg.rows import new_job
from xjobs_pg.wake_slots import WakeSlots

OUTBOX_RETENTION_MS = 7 * 24 * 3_600_000  # how long a published row is kept before a mark purges it
OUTBOX_PURGE_LIMIT = 1_000  # the most published rows one mark deletes

AsyncpgConnection = asyncpg.Connection | PoolConnectionProxy


class PostgresOutboxStore:
    """Staged rows keep every `NewJob` column; a published row is marked, then purged after retention.

    `stage_on` runs on the caller's connection (psycopg 3 sync or async, or asyncpg), never the
    pool, so the rows and the wake commit or roll back with the caller's transaction.
    """

    def __init__(
        self,
        executor: Executor,
        wake: WakeSlots,
        *,
        retention_ms: int = OUTBOX_RETENTION_MS,
        purge_limit: int = OUTBOX_PURGE_LIMIT,
    ) -> None:
        self._x = executor
        self._wake = wake
        self._retention_ms = finite_count("retention_ms", retention_ms)
        self._purge_limit = finite_count("purge_limit", purge_limit)

    def stage_on(
        self, conn: object, rows: Sequence[NewJob]
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        if isinstance(conn, AsyncpgConnection):
            return self._stage_asyncpg(conn, rows)
        if isinstance(conn, psycopg.AsyncConnection):
            return self._stage_psycopg_async(conn, rows)
        if isinstance(conn, psycopg.Connection):
            return self._stage_psycopg(conn, rows)
        kind = f"{type(conn).__module__}.{type(conn).__qualname__}"
        raise OutboxConnectionInvalidError(
            "the Postgres outbox stages on a psycopg 3 Connection or AsyncConnection, or an "
            f"asyncpg Connection, inside your transaction; got {kind}"
        )

    async def stage(self, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        try:
            async with self._x.pool.acquire() as conn, conn.transaction():
                return await self._stage_asyncpg(conn, rows)
        except XJobsError:
            raise
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        if limit <= 0:
            return []
        params = RelayClaimParams(self._x.now(), relay_id, limit, lease_ms)
        rows = await self._x.fetch("outbox_claim", params)
        return [new_job(row) for row in rows]

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        params = MarkParams(self._x.now(), relay_id, ids, self._retention_ms, self._purge_limit)
        row = await self._x.fetchrow("outbox_mark", params)
        assert row is not None
        return int(row["marked"])

    async def pending(self) -> int:
        row = await self._x.fetchrow("outbox_pending")
        assert row is not None
        return int(row["pending"])

    def _stage_args(self, rows: Sequence[NewJob]) -> tuple[object, ...]:
        """The bound `outbox_stage`; the wake goes only when a row is due and the slot allows."""
        now = self._x.now()
        due_by = now if now is not None else time.time_ns() // 1_000_000
        due = any(row.run_at_ms is None or row.run_at_ms <= due_by for row in rows)
        wake = self._wake.take([OUTBOX_WAKE]) if due else []
        return StageParams(now, rows, wake, self._wake.channel).bind()

    async def _stage_asyncpg(
        self, conn: AsyncpgConnection, rows: Sequence[NewJob]
    ) -> list[EnqueueResult]:
        if rows:
            try:
                await conn.execute(self._x.sql["outbox_stage"], *self._stage_args(rows))
            except Exception as exc:
                raise interpret_error(exc) from exc
        return _results(rows)

    async def _stage_psycopg_async(
        self, conn: psycopg.AsyncConnection[Any], rows: Sequence[NewJob]
    ) -> list[EnqueueResult]:
        if rows:
            try:
                # A raw cursor sends the statement as it is, `$n` placeholders and all.
                async with psycopg.AsyncRawCursor(conn) as cur:
                    await cur.execute(self._x.sql["outbox_stage"], self._stage_args(rows))
            except Exception as exc:
                raise interpret_error(exc) from exc
        return _results(rows)

    def _stage_psycopg(
        self, conn: psycopg.Connection[Any], rows: Sequence[NewJob]
    ) -> list[EnqueueResult]:
        if rows:
            try:
                with psycopg.RawCursor(conn) as cur:
                    cur.execute(self._x.sql["outbox_stage"], self._stage_args(rows))
            except Exception as exc:
                raise interpret_error(exc) from exc
        return _results(rows)


def _results(rows: Sequence[NewJob]) -> list[EnqueueResult]:
    """A staged row answers its own ids: the job's id is the row's, its run id allocated at stage."""
    return [EnqueueResult(job_id=row.id, run_id=row.run_id, deduped=False) for row in rows]
