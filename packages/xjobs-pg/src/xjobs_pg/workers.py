"""The Postgres worker registry: `<schema>.workers`, rows expiring after their TTL."""

from __future__ import annotations

from xjobs.contract.stores import WorkerInfo
from xjobs_pg.executor import Executor


class PostgresWorkerRegistry:
    """One row per live worker process; the claim statement refreshes it while the worker polls."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        args = (info.id, info.host, info.pid, list(info.queues), info.started_at_ms, ttl_ms)
        await self._x.execute("worker_announce", self._x.now(), *args)

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        return await self._x.execute("worker_beat", self._x.now(), worker_id, ttl_ms) == 1

    async def forget(self, worker_id: str) -> None:
        await self._x.execute("worker_forget", worker_id)

    async def list(self) -> list[WorkerInfo]:
        rows = await self._x.fetch("worker_list", self._x.now())
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
