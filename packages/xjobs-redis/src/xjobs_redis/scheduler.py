"""The Redis scheduler state and leader: watermarks, fires and pauses in the global slot, each move one script."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.driver import NewJob
from xjobs.contract.stores import TaskFire
from xjobs_redis.calls import scheduler as calls
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys


def decode_fire(task: str, text: str) -> TaskFire:
    """A task's field of the fires HASH as its `TaskFire`."""
    value = json.loads(text)
    return TaskFire(
        task=task,
        occurrence_ms=int(value["occurrence_ms"]),
        job_id=str(value["job_id"]),
        fired_at_ms=int(value["fired_at_ms"]),
    )


class RedisSchedulerState:
    """Reads are one plain command each; `arm` and `fire` are a compare-and-set script.

    `fire` writes the global slot and its job's queue slot in one script, so the scheduler runs on
    a standalone Redis (not on Cluster), as the event bus does.
    """

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        if not tasks:
            return {}
        key, names = self._k.scheduler_watermarks(), list(tasks)
        (values,) = await self._x.batch([lambda pipe: pipe.hmget(key, names)])
        return {t: int(v) for t, v in zip(names, values, strict=True) if v is not None}

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        call = calls.scheduler_arm(
            self._k, task=task, previous_ms=previous_ms, watermark_ms=watermark_ms
        )
        return bool(await self._x.run(call) == 1)

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        """One round trip: `scheduler_fire.lua` (its job's queue joins the queue set in it)."""
        fire = calls.scheduler_fire(
            self._k,
            now=self._x.now(),
            task=task,
            previous_ms=previous_ms,
            occurrence_ms=occurrence_ms,
            job=job,
        )
        return bool(await self._x.run(fire) == 1)

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        key = self._k.scheduler_fires()
        if tasks is None:
            (found,) = await self._x.batch([lambda pipe: pipe.hgetall(key)])
            return {str(t): decode_fire(str(t), str(v)) for t, v in dict(found).items()}
        if not tasks:
            return {}
        names = list(tasks)
        (values,) = await self._x.batch([lambda pipe: pipe.hmget(key, names)])
        return {t: decode_fire(t, str(v)) for t, v in zip(names, values, strict=True) if v}

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        if not tasks:
            return set()
        key, names = self._k.scheduler_paused(), list(tasks)
        (flags,) = await self._x.batch([lambda pipe: pipe.smismember(key, names)])
        return {t for t, flag in zip(names, flags, strict=True) if flag}

    async def pause(self, task: str) -> bool:
        key = self._k.scheduler_paused()
        (added,) = await self._x.batch([lambda pipe: pipe.sadd(key, task)])
        return bool(added == 1)

    async def resume(self, task: str) -> bool:
        key = self._k.scheduler_paused()
        (removed,) = await self._x.batch([lambda pipe: pipe.srem(key, task)])
        return bool(removed == 1)


class RedisLeader:
    """One leader HASH (holder, expiry): a fenced SET NX PX on the backend's clock, one script per call."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        call = calls.leader_acquire(self._k, now=self._x.now(), candidate=candidate, ttl_ms=ttl_ms)
        return bool(await self._x.run(call) == 1)

    async def release(self, candidate: str) -> None:
        await self._x.run(calls.leader_release(self._k, candidate=candidate))
