"""The Redis worker registry: rows in the global slot, expiring after their TTL."""

from __future__ import annotations

import json

from xjobs.contract.stores import WorkerInfo
from xjobs_redis.executor import Arg, Executor
from xjobs_redis.keys import Keys


class RedisWorkerRegistry:
    """A ZSET of expiries beside HASHes of infos and last-seen times; a claim refreshes the row."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._keys = [keys.workers(), keys.worker_info(), keys.worker_seen()]

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        details = {
            "host": info.host,
            "pid": info.pid,
            "queues": list(info.queues),
            "started_at_ms": info.started_at_ms,
        }
        args: list[Arg] = [self._x.now(), info.id, json.dumps(details, ensure_ascii=False), ttl_ms]
        await self._x.run("worker_announce", self._keys, args)

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        workers, _, seen = self._keys
        args: list[Arg] = [self._x.now(), worker_id, ttl_ms]
        return bool(await self._x.run("worker_beat", [workers, seen], args) == 1)

    async def forget(self, worker_id: str) -> None:
        await self._x.run("worker_forget", self._keys, [worker_id])

    async def list(self) -> list[WorkerInfo]:
        rows = await self._x.run("worker_list", self._keys, [self._x.now()])
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
