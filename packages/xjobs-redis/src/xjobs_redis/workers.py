"""The Redis worker registry: rows in the global slot, expiring after their TTL."""

from __future__ import annotations

import json

from xjobs.contract.stores import WorkerInfo
from xjobs_redis.calls import fleet
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys


class RedisWorkerRegistry:
    """A ZSET of expiries beside HASHes of infos and last-seen times; a claim refreshes the row."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        await self._x.run(
            fleet.worker_announce(self._k, now=self._x.now(), info=info, ttl_ms=ttl_ms)
        )

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        call = fleet.worker_beat(self._k, now=self._x.now(), worker_id=worker_id, ttl_ms=ttl_ms)
        return bool(await self._x.run(call) == 1)

    async def forget(self, worker_id: str) -> None:
        await self._x.run(fleet.worker_forget(self._k, worker_id=worker_id))

    async def list(self) -> list[WorkerInfo]:
        rows = await self._x.run(fleet.worker_list(self._k, now=self._x.now()))
        infos = []
        for worker_id, text, seen in rows:
            details = json.loads(text)
            infos.append(
                WorkerInfo(
                    id=str(worker_id),
                    host=str(details["host"]),
                    pid=int(details["pid"]),
                    queues=tuple(str(q) for q in details["queues"]),
                    started_at_ms=int(details["started_at_ms"]),
                    last_seen_ms=int(seen),
                )
            )
        return sorted(infos, key=lambda w: w.id)
