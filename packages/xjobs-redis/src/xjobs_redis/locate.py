"""Finding a job's queue by id: the queue set, then the one whose slot holds the job's HASH."""

from __future__ import annotations

from typing import Any

from xjobs.contract.driver import Claim
from xjobs_redis.executor import Command, Executor
from xjobs_redis.keys import Keys


async def queues(executor: Executor, keys: Keys) -> list[str]:
    """Every queue that ever held a job, in name order (one round trip)."""
    queues_key = keys.queues()
    (members,) = await executor.batch([lambda pipe: pipe.smembers(queues_key)])
    return sorted(str(queue) for queue in members)


def reader(command: str, key: str) -> Command:
    """A pipelined read of one job HASH: `hgetall` for its fields, else `exists`."""
    if command == "hgetall":
        return lambda pipe: pipe.hgetall(key)
    return lambda pipe: pipe.exists(key)


async def locate(executor: Executor, keys: Keys, job_id: str) -> str | None:
    """The queue holding `job_id` (two round trips: the queue set, then an EXISTS per queue), or
    `None` when none does."""
    names = await queues(executor, keys)
    if not names:
        return None
    replies: list[Any] = await executor.batch(
        [reader("exists", keys.job(q, job_id)) for q in names]
    )
    for queue, exists in zip(names, replies, strict=True):
        if exists:
            return queue
    return None


async def queue_of(executor: Executor, keys: Keys, claim: Claim) -> str | None:
    """The claim's queue, or the job's found by id for a claim built without one."""
    if claim.queue is not None:
        return claim.queue
    return await locate(executor, keys, claim.job_id)
