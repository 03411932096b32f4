"""The memory backend's `BackfillLedger`: one row per backfill run, in one process."""

from __future__ import annotations

from dataclasses import replace

from xjobs.clock import Clock
from xjobs.contract.backfills import (
    MAX_BACKFILL_ROWS,
    BackfillRow,
    BackfillStart,
    BackfillStatus,
    cut_error,
    finished_status,
    rows_limit,
)


class MemoryBackfillLedger:
    """Rows by run id; each write replaces one row, as the pg statement and the Redis script do."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[str, BackfillRow] = {}

    async def begin(self, start: BackfillStart) -> None:
        now = self._clock.now_ms()
        row = self._rows.get(start.run_id)
        if row is None:
            self._rows[start.run_id] = BackfillRow(
                run_id=start.run_id,
                job_id=start.job_id,
                name=start.name,
                checksum=start.checksum,
                environment=start.environment,
                tenant=start.tenant,
                status="running",
                cursor=None,
                count=0,
                batches=0,
                error=None,
                started_at_ms=now,
                updated_at_ms=now,
                finished_at_ms=None,
            )
            return
        self._rows[start.run_id] = replace(
            row, status="running", error=None, finished_at_ms=None, updated_at_ms=now
        )

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        row = self._rows.get(run_id)
        if row is None or row.status != "running":
            return False
        self._rows[run_id] = replace(
            row, cursor=cursor, count=count, batches=batches, updated_at_ms=self._clock.now_ms()
        )
        return True

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        status = finished_status(status)
        row = self._rows.get(run_id)
        if row is None:
            return False
        now = self._clock.now_ms()
        self._rows[run_id] = replace(
            row, status=status, error=cut_error(error), updated_at_ms=now, finished_at_ms=now
        )
        return True

    async def get(self, run_id: str) -> BackfillRow | None:
        return self._rows.get(run_id)

    async def rows(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        limit = rows_limit(limit)
        found = [r for r in self._rows.values() if name is None or r.name == name]
        found.sort(key=lambda r: (-r.started_at_ms, r.run_id))
        return found[:limit]

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> BackfillRow | None:
        done = [
            r
            for r in self._rows.values()
            if r.status == "completed"
            and (r.name, r.checksum, r.environment, r.tenant)
            == (name, checksum, environment, tenant)
        ]
        done.sort(key=lambda r: (r.finished_at_ms or 0, r.run_id))
        return done[0] if done else None
