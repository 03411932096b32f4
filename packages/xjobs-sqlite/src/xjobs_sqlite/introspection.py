"""The SQLite operator surface (`JobIntrospection`): reads on the reader, moves on the writer."""

from __future__ import annotations

from collections.abc import Callable

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import BulkResult, JobMove
from xjobs.contract.introspection import (
    AttemptError,
    CounterBucket,
    CounterTier,
    JobFilter,
    JobPosition,
    JobSummary,
    Pause,
    PauseKind,
    QueueCounts,
)
from xjobs_sqlite import bulk, listing
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


class SqliteIntrospection:
    """`JobIntrospection` over the file: lists, counts, counters, pauses, and the bulk verbs."""

    def __init__(
        self, executor: Executor, wake: WakeSource, settled: Callable[[str], None]
    ) -> None:
        self._x = executor
        self._wake = wake
        self._settled = settled

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        """A page newest first by (created_at, id), strictly older than `after`."""
        return await self._x.read(lambda conn: listing.list_page(conn, where, limit, after))

    async def errors(self, job_id: str) -> list[AttemptError]:
        """A job's stored attempt errors, oldest first."""
        rows = await self._x.read(
            lambda conn: conn.execute(sql("attempt_errors"), {"job_id": job_id}).fetchall()
        )
        return [AttemptError(*row) for row in rows]

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        """Every known queue's bounded counts, by name."""
        return await self._x.read(lambda conn: listing.queue_counts(conn, now_ms))

    async def counters(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        """The buckets of `tier` from `since_ms` on, by bucket, name, outcome."""
        params = {"tier": tier, "since": since_ms}
        rows = await self._x.read(
            lambda conn: conn.execute(sql("counter_buckets"), params).fetchall()
        )
        return [CounterBucket(tier, *row) for row in rows]

    async def rollup_counters(self, now_ms: int) -> int:
        """Fold closed minute buckets into hours and days, each once."""
        return await self._x.write(lambda conn: bulk.rollup(conn, now_ms))

    async def pause(self, kind: PauseKind, name: str) -> bool:
        """Write a pause row; whether it was not paused."""
        params = {"kind": kind, "name": name, "now": self._x.now()}
        added = await self._x.write(lambda conn: conn.execute(sql("pause"), params).rowcount)
        return added == 1

    async def resume(self, kind: PauseKind, name: str) -> bool:
        """Delete a pause row; whether it was paused. A resume may free work in any queue."""
        params = {"kind": kind, "name": name}
        removed = await self._x.write(lambda conn: conn.execute(sql("resume"), params).rowcount)
        if removed:
            self._wake.emit(None)
        return removed == 1

    async def pauses(self) -> list[Pause]:
        """Every pause row, by kind then name."""
        rows = await self._x.read(lambda conn: conn.execute(sql("pause_rows")).fetchall())
        return [Pause(*row) for row in rows]

    async def promote(self, job_id: str) -> JobMove:
        """Make a `ready` job due now."""
        now = self._x.now()
        move = await self._x.write(lambda conn: bulk.promote(conn, job_id, now))
        if move.record is not None:
            self._wake.emit(move.record.queue)
        return move

    async def remove(self, job_id: str) -> JobMove:
        """Delete a finished job with its steps and errors."""
        return await self._x.write(lambda conn: bulk.remove(conn, job_id))

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        """Cancel up to `limit` matching live jobs, oldest first."""
        now = self._x.now()
        result, cancelled = await self._x.write(
            lambda conn: bulk.cancel_many(conn, where, limit, reason, now)
        )
        for job_id in cancelled:
            self._settled(job_id)
        return result

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Make up to `limit` matching ready jobs due now, oldest first."""
        now = self._x.now()
        result, queues = await self._x.write(
            lambda conn: bulk.promote_many(conn, where, limit, now)
        )
        for queue in sorted(queues):
            self._wake.emit(queue)
        return result

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Delete up to `limit` matching finished jobs, oldest first."""
        return await self._x.write(lambda conn: bulk.remove_many(conn, where, limit))

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Requeue up to `limit` matching finished jobs, oldest first."""
        now = self._x.now()
        result = await self._x.write(lambda conn: bulk.retry_many(conn, where, limit, now))
        if result.moved:
            self._wake.emit(None)
        return result
