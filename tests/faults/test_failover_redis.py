"""Faults: a Redis Sentinel failover under load, with and without `wait_replicas`.

A producer enqueues at about 50 jobs a second and two worker processes run them, all through
`redis+sentinel://`; the primary is SIGKILLed, the sentinels promote its replica, and the old
primary comes back as a replica of the new one. With `wait_replicas=1` every acknowledged enqueue,
step and settle was on the replica before it was answered: nothing acknowledged is lost, nothing
stuck, every duplicate run falls in the failover. Without it Redis replicates asynchronously: the
loss window is measured and printed (what the replica had not received when the primary died),
not promised.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import xjobs
from xjobs.errors import BackendUnavailableError
from xjobs_redis.sentinel_servers import SentinelGroup, sentinel_group
from xjobs_redis.servers import ServerUnavailable, unavailable

from .fault_app import JOBS, Work, work
from .harness import Scene

RATE_PER_S = 50
LOAD_BEFORE_S = 2.0
LOAD_AFTER_S = 2.0


@pytest.fixture
def group() -> Iterator[SentinelGroup]:
    try:
        started = sentinel_group()
    except ServerUnavailable as exc:
        unavailable(str(exc))
    try:
        yield started
    finally:
        started.remove()


@pytest.mark.scenario("Sentinel failover under load")
@pytest.mark.parametrize("wait", [True, False], ids=["wait_replicas=1", "async-replication"])
@pytest.mark.asyncio
async def test_a_sentinel_failover_under_load(
    group: SentinelGroup, tmp_path: Path, wait: bool
) -> None:
    query = f"xjobs_prefix=xjobs_f_{secrets.token_hex(4)}"
    if wait:
        query += "&wait_replicas=1&wait_timeout_ms=500"
    scene = Scene(
        f"Sentinel failover under load (wait={wait})", "redis", group.url(query), tmp_path
    )
    stop = asyncio.Event()
    try:
        async with xjobs.App(scene.url, jobs=JOBS) as app:
            await scene.started(scene.worker(), scene.worker())
            producing = asyncio.create_task(produce(scene, stop))
            await asyncio.sleep(LOAD_BEFORE_S)
            start = time.time()
            old = group.kill_primary()
            await asyncio.to_thread(group.await_failover, old)
            await asyncio.to_thread(old.start)  # the sentinels make it a replica of the new one
            await asyncio.to_thread(group.await_replicated)
            scene.fault("primary SIGKILLed, replica promoted, old primary rejoined", start)
            await asyncio.sleep(LOAD_AFTER_S)
            stop.set()
            await producing
            ledger = await scene.settle(app, bound_s=60)
    finally:
        unclean = scene.close()
    assert not unclean, f"processes that did not exit 0 on SIGTERM: {unclean}"
    if wait:
        ledger.check()
    else:
        print(f"\n{ledger.summary()} (asynchronous replication: the loss window, measured)")
        assert ledger.stuck == 0, ledger.notes


async def produce(scene: Scene, stop: asyncio.Event) -> None:
    """Enqueue at `RATE_PER_S` until `stop`; a refused enqueue is retried with the same key (the
    idempotency key makes that safe) and counted only once acknowledged."""
    n = 0
    while not stop.is_set():
        key = f"load-{n}"
        n += 1
        while not stop.is_set():
            try:
                scene.ledger.acknowledge(key, await work.enqueue(Work(key=key, hold_s=0.05)))
                break
            except BackendUnavailableError:
                await asyncio.sleep(0.1)
        await asyncio.sleep(1 / RATE_PER_S)
