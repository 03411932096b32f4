"""The result store's publish rule: a settle publishes a job's id only when someone watches it."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT, Claim
from xjobs.testing import rows
from xjobs_redis import registry
from xjobs_redis.calls import jobs
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys

QUEUE = "results"


async def settled_messages(pubsub: Any) -> list[str]:
    """What arrived on the subscription within a short quiet period."""
    found = []
    while (
        message := await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
    ) is not None:
        found.append(str(message["data"]))
    return found


async def run_one(x: Executor, k: Keys, key: str, *, watched: bool, result: str | None) -> str:
    job = rows.new_job(queue=QUEUE, idempotency_key=key)
    now = x.now()
    # as the driver enqueues: a queue it has not seen joined joins the queue set first
    enqueue = jobs.enqueue(k, now=now, queue=QUEUE, jobs=[job])
    queues = registry.QueueRegistry(x, k)
    assert await queues.enqueue([(QUEUE, enqueue)]) == [[1]]  # inserted: the row's own ids
    claim_call = jobs.claim(
        k,
        now=now,
        queue=QUEUE,
        take=1,
        worker_id="w-1",
        lease_ms=30_000,
        buried_error=LAPSED_ON_FINAL_ATTEMPT,
        sweep_bound=100,
    )
    ((fields, *_),), _ = await x.run(claim_call)
    assert fields is not None
    if watched:
        assert await x.run(jobs.watch(k, queue=QUEUE, job_id=job.id)) == "running"
    claim = Claim(job.id, "w-1", 1, QUEUE)
    assert await x.run(jobs.ack(k, now=now, queue=QUEUE, claim=claim, result=result)) == 1
    return job.id


@pytest.mark.asyncio
async def test_only_a_watched_settle_publishes_and_only_once(client: Redis, prefix: str) -> None:
    x, k = Executor(client, ManualClock()), Keys(prefix)
    await x.load()
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    try:
        await pubsub.subscribe(k.settled_channel(QUEUE))
        await run_one(x, k, "plain", watched=False, result=None)
        await run_one(x, k, "valued", watched=False, result="1")
        assert await settled_messages(pubsub) == []
        watched = await run_one(x, k, "watched", watched=True, result="2")
        assert await settled_messages(pubsub) == [watched]
        assert await client.hmget(k.job(QUEUE, watched), "result", "watch") == ["2", None]
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]


@pytest.mark.asyncio
async def test_a_watch_on_a_finished_or_missing_job_answers_its_state(
    client: Redis, prefix: str
) -> None:
    x, k = Executor(client, ManualClock()), Keys(prefix)
    await x.load()
    done = await run_one(x, k, "done", watched=False, result=None)
    assert await x.run(jobs.watch(k, queue=QUEUE, job_id=done)) == "completed"
    assert not await client.hexists(k.job(QUEUE, done), "watch")
    assert await x.run(jobs.watch(k, queue=QUEUE, job_id="nope")) == ""
    assert not await client.exists(k.job(QUEUE, "nope"))
