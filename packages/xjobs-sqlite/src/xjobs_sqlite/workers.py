"""The worker registry: one row per live worker process in `workers`, expiring after its TTL."""

from __future__ import annotations

import json

from xjobs.contract.stores import WorkerInfo
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


class SqliteWorkerRegistry:
    """`WorkerRegistry` over `workers`; the claim refreshes a registered worker's row too."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        """Write this worker's row (and sweep the expired ones)."""
        now = self._x.now()
        params = {
            "id": info.id,
            "host": info.host,
            "pid": info.pid,
            "queues": json.dumps(list(info.queues)),
            "started_at_ms": info.started_at_ms,
            "now": now,
            "ttl_ms": ttl_ms,
        }

        def write(conn: Connection) -> None:
            conn.execute(sql("worker_sweep"), {"now": now})
            conn.execute(sql("worker_announce"), params)

        await self._x.write(write)

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        """Refresh an unexpired row; whether it was there."""
        params = {"id": worker_id, "now": self._x.now(), "ttl_ms": ttl_ms}
        beat = await self._x.write(lambda conn: conn.execute(sql("worker_beat"), params).rowcount)
        return beat == 1

    async def forget(self, worker_id: str) -> None:
        """Remove this worker's row."""
        await self._x.write(lambda conn: conn.execute(sql("worker_forget"), {"id": worker_id}))

    async def list(self) -> list[WorkerInfo]:
        """The unexpired rows, by id."""
        now = self._x.now()
        rows = await self._x.read(
            lambda conn: conn.execute(sql("worker_list"), {"now": now}).fetchall()
        )
        return [
            WorkerInfo(row[0], row[1], row[2], tuple(json.loads(row[3])), row[4], row[5])
            for row in rows
        ]
