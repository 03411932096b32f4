"""Faults: a Redis that may drop or refuse writes — no persistence, an eviction policy, a full memory.

Promised: a worker on a Redis that keeps nothing on disk or may evict keys says so loudly when it
starts (`jobs.redis.no-persistence`, `jobs.redis.eviction-policy`, and `backend.health` carries
both) and still serves; a Redis at its `maxmemory` under `noeviction` refuses an enqueue with a
coded error to the caller (nothing half-written), while the jobs already running still settle,
and once memory is freed every acknowledged job completes.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from redis.asyncio import Redis
from redis.exceptions import OutOfMemoryError

import xjobs
from xjobs.errors import XJobsError
from xjobs_redis.health import server_health

from .fault_app import JOBS, Work, work
from .harness import Scene, Target, until

JUNK = "junk-not-xjobs"


@pytest.mark.scenario("Redis without persistence, with an eviction policy: loud at start")
@pytest.mark.parametrize("target", ["redis"], indirect=True)
@pytest.mark.redis_server(appendonly=False, maxmemory_policy="allkeys-lru")
@pytest.mark.asyncio
async def test_a_worker_on_a_redis_that_may_lose_or_evict_jobs_says_so_when_it_starts(
    scene: Scene,
) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        health = server_health(app.backend)
        assert health is not None
        assert (health["persistence"], health["eviction_policy"]) == ("none", "allkeys-lru")
        worker = scene.worker()
        await scene.started(worker)
        assert worker.lines("jobs.redis.no-persistence"), worker.text()[-2000:]
        evicting = worker.lines("jobs.redis.eviction-policy")
        assert evicting, worker.text()[-2000:]
        assert "ERROR" in evicting[0], evicting[0]
        assert "allkeys-lru" in evicting[0], evicting[0]
        keys = [f"served-{n}" for n in range(5)]  # the loud start does not stop it serving
        scene.ledger.acknowledge_all(keys, await work.enqueue_many([Work(key=k) for k in keys]))
        ledger = await scene.settle(app)
    ledger.check(duplicated=0)


async def fill(client: Redis, headroom: int) -> int:
    """Cap the server's memory just above what it uses, then write junk (outside every xjobs
    prefix) until it refuses; answers how many junk keys landed. The values shrink at each
    refusal (a refused write's own argument counts until it is freed), so at the end even a
    64-byte write is refused: the server is full without anyone's request in flight."""
    used = int((await client.info("memory"))["used_memory"])
    await client.config_set("maxmemory", used + headroom)
    written = 0
    for size in (16_384, 1_024, 64):
        with contextlib.suppress(OutOfMemoryError):
            while True:
                await client.set(f"{JUNK}:{written}", "x" * size)
                written += 1
    return written


@pytest.mark.scenario("Redis full (maxmemory, noeviction): enqueue refused, running jobs settle")
@pytest.mark.parametrize("target", ["redis"], indirect=True)
@pytest.mark.asyncio
async def test_a_full_redis_refuses_the_enqueue_with_a_code_and_running_jobs_still_settle(
    scene: Scene, target: Target
) -> None:
    assert target.redis is not None
    client = Redis.from_url(target.redis.url)
    try:
        async with xjobs.App(scene.url, jobs=JOBS) as app:
            worker = scene.worker(concurrency=5)
            await scene.started(worker)
            running = [f"running-{n}" for n in range(5)]
            results = await work.enqueue_many([Work(key=k, hold_s=3.0) for k in running])
            scene.ledger.acknowledge_all(running, results)
            await until(lambda: len(scene.effects.running_in(worker.pid)) == 5, what="5 running")
            async with scene.window("redis at maxmemory (noeviction)"):
                junk = await fill(client, headroom=64_000)
                with pytest.raises(XJobsError) as refused:
                    await work.enqueue(Work(key="refused"))
                # the running jobs reach their settle while the server is still full
                await until(
                    lambda: not scene.effects.running_in(worker.pid),
                    what="the running bodies to finish",
                )
                settled = await _settled(app, [r.job_id for r in results])
                await client.config_set("maxmemory", 0)
                await client.delete(*[f"{JUNK}:{n}" for n in range(junk)])
            # the refused enqueue left nothing behind: its key is free, the retry is fresh
            again = await work.enqueue(Work(key="refused"))
            scene.ledger.acknowledge("refused", again)
            after = [f"after-{n}" for n in range(5)]
            scene.ledger.acknowledge_all(
                after, await work.enqueue_many([Work(key=k) for k in after])
            )
            ledger = await scene.settle(app)
    finally:
        await client.aclose()
    print(f"\n{junk} junk keys filled the server; refused with {refused.value.code}")
    ledger.check(duplicated=0)
    assert refused.value.code == "XJOBS_BACKEND_ERROR", refused.value
    assert "maxmemory" in str(refused.value), refused.value
    assert not again.deduped, "the refused enqueue left a live job behind"
    assert settled == len(running), f"only {settled} of the running jobs settled while full"


async def _settled(app: xjobs.App, job_ids: list[str], within_s: float = 5.0) -> int:
    """How many of `job_ids` reached `completed` within `within_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        states = [(await app.get_job(job_id)).state for job_id in job_ids]
        done = states.count("completed")
        if done == len(job_ids) or loop.time() > deadline:
            return done
        await asyncio.sleep(0.1)
