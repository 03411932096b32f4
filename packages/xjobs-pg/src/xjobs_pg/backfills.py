"""The Postgres `BackfillLedger`: `<schema>.backfills`, one row per run, the statements of `sql/backfills.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import asyncpg

from xjobs.contract.backfills import (
    MAX_BACKFILL_ROWS,
    BackfillRow,
    BackfillStart,
    BackfillStatus,
    cut_error,
    finished_status,
    rows_limit,
)
from xjobs_pg.executor import Executor
from xjobs_pg.params import Bound, One


@dataclass(frozen=True, slots=True)
class BackfillParams:
    """A ledger statement's parameters in `$n` order (the layouts are in `sql/backfills.sql`)."""

    values: Bound

    def bind(self) -> Bound:
        return self.values


def backfill_row(row: asyncpg.Record) -> BackfillRow:
    """A `backfills` row as its wire record."""
    return BackfillRow(
        run_id=str(row["run_id"]),
        job_id=str(row["job_id"]),
        name=row["name"],
        checksum=row["checksum"],
        environment=row["environment"],
        tenant=row["tenant"],
        status=cast(BackfillStatus, row["status"]),
        cursor=row["cursor"],
        count=int(row["count"]),
        batches=int(row["batches"]),
        error=row["error"],
        started_at_ms=int(row["started_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
        finished_at_ms=None if row["finished_at_ms"] is None else int(row["finished_at_ms"]),
    )


class PostgresBackfillLedger:
    """Each write is one statement on one row; the clock is the executor's (the server's, live)."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    def _p(self, *values: object) -> BackfillParams:
        return BackfillParams((self._x.now(), *values))

    async def begin(self, start: BackfillStart) -> None:
        s = start
        await self._x.execute(
            "backfill_begin",
            self._p(s.run_id, s.job_id, s.name, s.checksum, s.environment, s.tenant),
        )

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        row = await self._x.fetchrow("backfill_checkpoint", self._p(run_id, cursor, count, batches))
        return row is not None

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        status = finished_status(status)
        row = await self._x.fetchrow("backfill_finish", self._p(run_id, status, cut_error(error)))
        return row is not None

    async def get(self, run_id: str) -> BackfillRow | None:
        row = await self._x.fetchrow("backfill_get", One(run_id))
        return None if row is None else backfill_row(row)

    async def rows(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        bound = rows_limit(limit)
        found = await self._x.fetch("backfill_rows", BackfillParams((name, bound)))
        return [backfill_row(r) for r in found]

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> BackfillRow | None:
        row = await self._x.fetchrow(
            "backfill_completed", BackfillParams((name, checksum, environment, tenant))
        )
        return None if row is None else backfill_row(row)
