"""The Postgres worker registry: `<schema>.workers`, rows expiring after their TTL."""

from __future__ import annotations

from xjobs.contract.stores import WorkerInfo
from xjobs_pg.executor import Executor
from xjobs_pg.params import One
from xjobs_pg.store_params import AnnounceParams, BeatParams, NowParams


class PostgresWorkerRegistry:
    """One row per live worker process; the claim statement refreshes it while the worker polls."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        await self._x.execute("worker_announce", AnnounceParams(self._x.now(), info, ttl_ms))

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        params = BeatParams(self._x.now(), worker_id, ttl_ms)
        return await self._x.execute("worker_beat", params) == 1

    async def forget(self, worker_id: str) -> None:
        await self._x.execute("worker_forget", One(worker_id))

    async def list(self) -> list[WorkerInfo]:
        rows = await self._x.fetch("worker_list", NowParams(self._x.now()))
        return [
            WorkerInfo(
                id=row["id"],
                host=row["host"],
                pid=row["pid"],
                queues=tuple(row["queues"]),
                started_at_ms=row["started_at_ms"],
                last_seen_ms=row["last_seen_ms"],
            )
            for row in rows
        ]
