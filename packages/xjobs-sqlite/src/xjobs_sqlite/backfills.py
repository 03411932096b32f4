"""The backfill ledger: one row per backfill run in `backfills`, each write one statement."""

from __future__ import annotations

from collections.abc import Mapping

from xjobs.contract.backfills import (
    MAX_BACKFILL_ROWS,
    BackfillRow,
    BackfillStart,
    BackfillStatus,
    cut_error,
    finished_status,
    rows_limit,
)
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


class SqliteBackfillLedger:
    """`BackfillLedger` over `backfills`, keyed by run id."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def _changed(self, statement: str, params: Mapping[str, object]) -> bool:
        changed = await self._x.write(lambda conn: conn.execute(sql(statement), params).rowcount)
        return changed == 1

    async def _one(self, statement: str, params: Mapping[str, object]) -> BackfillRow | None:
        row = await self._x.read(lambda conn: conn.execute(sql(statement), params).fetchone())
        return None if row is None else BackfillRow(*row)

    async def begin(self, start: BackfillStart) -> None:
        """Record that a run started (again): running, its position kept."""
        await self._changed(
            "backfill_begin",
            {
                "run_id": start.run_id,
                "job_id": start.job_id,
                "name": start.name,
                "checksum": start.checksum,
                "environment": start.environment,
                "tenant": start.tenant,
                "now": self._x.now(),
            },
        )

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        """Record a running run's position after a batch that ran."""
        params = {
            "run_id": run_id,
            "cursor": cursor,
            "count": count,
            "batches": batches,
            "now": self._x.now(),
        }
        return await self._changed("backfill_checkpoint", params)

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        """Settle the run's row completed or failed, its error cut."""
        params = {
            "run_id": run_id,
            "status": finished_status(status),
            "error": cut_error(error),
            "now": self._x.now(),
        }
        return await self._changed("backfill_finish", params)

    async def get(self, run_id: str) -> BackfillRow | None:
        """One run's row."""
        return await self._one("backfill_get", {"run_id": run_id})

    async def rows(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        """The rows (of one sweep, or all), newest start first, then run id."""
        params = {"name": name, "limit": rows_limit(limit)}
        found = await self._x.read(
            lambda conn: conn.execute(sql("backfill_rows"), params).fetchall()
        )
        return [BackfillRow(*row) for row in found]

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> BackfillRow | None:
        """The earliest completed row of this declaration, environment and tenant."""
        params = {"name": name, "checksum": checksum, "environment": environment, "tenant": tenant}
        return await self._one("backfill_completed", params)
