"""The Redis scheduler state and leader: watermarks, fires and pauses in the global slot; a fire
moves the watermark there, then enqueues its job in the job's queue slot, then records itself."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.driver import NewJob
from xjobs.contract.stores import TaskFire
from xjobs_redis.calls import jobs as job_calls
from xjobs_redis.calls import scheduler as calls
from xjobs_redis.executor import Command, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.registry import QueueRegistry
from xjobs_redis.rows import enqueue_result


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
    """Reads are one plain command each; `arm` is a compare-and-set script, `fire` three steps.

    No script spans two slots, so a fire is: the watermark's compare-and-set, leaving the fire
    pending with its job (the deployment's slot); the job's enqueue (its queue's slot, deduped
    by id); the fire recorded (the deployment's slot, fenced on the pending occurrence). A fire
    that a stopped scheduler left pending is completed by the next `watermarks` read, whoever
    makes it, and blocks the task's next fire until then.
    """

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys
        self._registry = QueueRegistry(executor, keys)

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        """One round trip (the pending fires read beside), and any pending fire completed."""
        key, pending, names = (
            self._k.scheduler_watermarks(),
            self._k.scheduler_pending(),
            list(tasks),
        )
        reads: list[Command] = [lambda pipe: pipe.hgetall(pending)]
        if names:
            reads.append(lambda pipe: pipe.hmget(key, names))
        left, *values = await self._x.batch(reads)
        for task, text in dict(left).items():
            entry = json.loads(str(text))
            job = NewJob(**json.loads(entry["job"]))
            occurrence_ms, fired_at_ms = int(entry["occurrence_ms"]), int(entry["fired_at_ms"])
            await self._complete(str(task), occurrence_ms, job, fired_at_ms)
        if not names:
            return {}
        return {t: int(v) for t, v in zip(names, values[0], strict=True) if v is not None}

    async def _complete(self, task: str, occurrence_ms: int, job: NewJob, fired_at_ms: int) -> None:
        """A pending fire's last two steps: its job's enqueue, then its record. The job is
        enqueued at the fire's instant (read once, by the fire's script), so its `created_at_ms`
        is the fire's `fired_at_ms` whoever completes the fire and whenever."""
        call = job_calls.enqueue(self._k, now=str(fired_at_ms), queue=job.queue, jobs=[job])
        (answer,) = (await self._registry.enqueue([(job.queue, call)]))[0]
        job_id = enqueue_result(job, answer).job_id
        fired = calls.scheduler_fired(
            self._k, task=task, occurrence_ms=occurrence_ms, job_id=job_id
        )
        await self._x.run(fired)

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        call = calls.scheduler_arm(
            self._k, task=task, previous_ms=previous_ms, watermark_ms=watermark_ms
        )
        return bool(await self._x.run(call) == 1)

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        """Three round trips (on a Cluster three more for a new queue's first job): see the class."""
        fire = calls.scheduler_fire(
            self._k,
            now=self._x.now(),
            task=task,
            previous_ms=previous_ms,
            occurrence_ms=occurrence_ms,
            job=job,
        )
        fired_at_ms = int(await self._x.run(fire))
        if fired_at_ms < 0:
            return False
        await self._complete(task, occurrence_ms, job, fired_at_ms)
        return True

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
