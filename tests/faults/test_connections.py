"""Faults: connections cut under the workers — `pg_terminate_backend` of every worker session,
again and again; of the LISTEN session alone; a network partition between the workers and the
database (through a TCP proxy: every byte dropped, then every byte stalled).

Promised: nothing acknowledged is lost or stuck; a duplicate run happens only inside a fault
window; after the LISTEN session is killed the worker listens again and a new job is picked up
by the wake, not by the (slower) poll; after a partition heals the workers carry on without a
restart.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit, urlunsplit

import pytest

import xjobs

from .fault_app import JOBS, Work, work
from .harness import (
    LEASE_S,
    Proxy,
    Scene,
    Target,
    pg_terminate,
    pg_worker_backends,
    until,
    until_async,
)

ROUNDS = 5
EVERY_S = 0.7
PARTITION_S = 3 * LEASE_S


async def enqueue(scene: Scene, prefix: str, n: int, hold_s: float = 0.5) -> None:
    keys = [f"{prefix}-{i}" for i in range(n)]
    scene.ledger.acknowledge_all(
        keys, await work.enqueue_many([Work(key=k, hold_s=hold_s) for k in keys])
    )


@pytest.mark.scenario("pg_terminate_backend of every worker session, repeatedly")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_terminating_every_worker_session_repeatedly(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        await enqueue(scene, "cut", 40)
        await scene.started(scene.worker(), scene.worker())
        terminated = 0
        async with scene.window(f"pg_terminate_backend x{ROUNDS}"):
            for _ in range(ROUNDS):
                await asyncio.sleep(EVERY_S)
                terminated += await pg_terminate(scene.url, await pg_worker_backends(scene.url))
                await enqueue(scene, f"cut-{terminated}", 4)
        ledger = await scene.settle(app)
    print(f"\n{terminated} worker sessions terminated in {ROUNDS} rounds")
    assert terminated >= 2 * ROUNDS, "the workers' sessions were not found"
    ledger.check()


async def pickup_latency(scene: Scene, key: str) -> float:
    """Enqueue one job and answer how long until its body started."""
    sent = time.time()
    scene.ledger.acknowledge(key, await work.enqueue(Work(key=key)))
    await until(lambda: scene.effects.count("start", key=key) > 0, what=f"{key} to start")
    (row,) = [r for r in scene.effects.rows("start") if r["key"] == key]
    return float(row["at"]) - sent


@pytest.mark.scenario("pg_terminate_backend of the LISTEN session")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_terminating_the_listen_session_the_wake_recovers(scene: Scene) -> None:
    idle_s = 6.0  # past the idle backoff's ceiling with a live wake (5 s): only a wake is fast
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        await scene.started(scene.worker())
        await until_async(
            lambda: _listening(scene), what="the worker's LISTEN session", timeout_s=10
        )
        await asyncio.sleep(idle_s)
        before = await pickup_latency(scene, "before")
        (listener,) = await pg_worker_backends(scene.url, listening=True)
        cut = time.time()
        assert await pg_terminate(scene.url, [listener]) == 1
        scene.fault("pg_terminate_backend of the LISTEN session", cut)

        async def listening_again() -> bool:
            return any(
                pid != listener for pid in await pg_worker_backends(scene.url, listening=True)
            )

        await until_async(listening_again, what="a new LISTEN session", timeout_s=10)
        relisten_s = time.time() - cut
        await asyncio.sleep(idle_s)
        after = await pickup_latency(scene, "after")
        ledger = await scene.settle(app)
    ledger.recovery_s = relisten_s
    print(
        f"\npickup before {before:.2f} s, after {after:.2f} s; listening again in {relisten_s:.2f} s"
    )
    ledger.check(duplicated=0)
    assert before < 1.5, f"the wake did not work to begin with ({before:.2f} s)"
    assert after < 1.5, (
        f"after the LISTEN session died, pickup took {after:.2f} s (the poll, not the wake)"
    )


async def _listening(scene: Scene) -> bool:
    return bool(await pg_worker_backends(scene.url, listening=True))


def through(url: str, port: int) -> str:
    """`url` with its port replaced (the workers dial the proxy)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit(":", 1)[0] + f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@pytest.mark.scenario("network partition workers-database")
@pytest.mark.parametrize("mode", ["drop", "stall"])
@pytest.mark.asyncio
async def test_a_network_partition_between_the_workers_and_the_database(
    scene: Scene, target: Target, mode: str
) -> None:
    scene.ledger.scenario = f"network partition workers-database ({mode} {PARTITION_S:.0f} s)"
    proxy = Proxy("127.0.0.1", target.port())
    scene.worker_url = through(scene.url, proxy.start())
    try:
        async with xjobs.App(scene.url, jobs=JOBS) as app:
            await enqueue(scene, "first", 20, hold_s=1.0)
            first, second = scene.worker(), scene.worker()
            await scene.started(first, second)
            await until(lambda: scene.effects.count("start") >= 4, what="runs in flight")
            async with scene.window(f"partition: {mode}"):
                proxy.set(mode)
                await enqueue(scene, "during", 10, hold_s=0.2)  # the test reaches the database
                await asyncio.sleep(PARTITION_S)
                proxy.set("pass")
            await enqueue(scene, "after", 10, hold_s=0.2)
            ledger = await scene.settle(app)
            alive = [p.alive for p in (first, second)]
    finally:
        proxy.close()
    ledger.check()
    assert alive == [True, True], "a worker died of the partition"
