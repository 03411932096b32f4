"""Faults: the database server restarts under load — three workers, and a producer enqueuing
through the restart, retrying each failed enqueue with the same idempotency key.

Promised: on Postgres (`restart -m fast` and `-m immediate`, a crash) and on Redis with the AOF
(`appendfsync always`, and `everysec`, each `kill -9`ed and started again) nothing acknowledged is
lost or stuck and, the restart being shorter than the lease, nothing runs twice. Under `everysec` a
kill of the server PROCESS loses nothing in practice (the AOF is written before replies go out;
only its fsync lags), and what `everysec` promises is loss of at most the last second, so the test
tolerates losing only writes acknowledged within the last second before the kill.

NOT promised: a Redis without persistence (`appendonly no`, no snapshots) restarted with
`SHUTDOWN NOSAVE` comes back empty — every acknowledged job not yet completed is LOST. The
scenario records the loss and checks that the workers recover and serve new jobs.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

import xjobs
from xjobs_pg.servers import ShutdownMode, restart_postgres

from .fault_app import JOBS, Work, work
from .harness import LEASE_S, Producer, Scene, Target, pg_restartable, until

JOBS_PRODUCED = 60
EVERY_S = 0.05
STRIKE_AFTER_S = 1.0


def producer(scene: Scene) -> Producer:
    return Producer(
        work, scene.ledger, lambda key: Work(key=key, hold_s=0.2), JOBS_PRODUCED, EVERY_S
    )


async def fleet(scene: Scene, n: int = 3) -> None:
    await scene.started(*[scene.worker() for _ in range(n)])


@pytest.mark.scenario("Postgres restart under load")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.parametrize("mode", ["fast", "immediate"])
@pytest.mark.asyncio
async def test_postgres_restart_under_load(scene: Scene, mode: ShutdownMode) -> None:
    pg_restartable()
    scene.ledger.scenario = f"Postgres restart -m {mode} under load"
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        await fleet(scene)
        feed = producer(scene)
        producing = asyncio.ensure_future(feed.run())
        await asyncio.sleep(STRIKE_AFTER_S)
        async with scene.window(f"pg_ctl restart -m {mode}"):
            await asyncio.to_thread(restart_postgres, mode)
        outage = scene.faults[-1].end - scene.faults[-1].start
        await producing
        ledger = await scene.settle(app)
    print(f"\nrestart took {outage:.2f} s; the producer retried {feed.retries} enqueues")
    ledger.check(duplicated=0 if outage < LEASE_S else None)


def redis_config(appendonly: bool, appendfsync: str) -> pytest.MarkDecorator:
    return pytest.mark.redis_server(appendonly=appendonly, appendfsync=appendfsync)


@pytest.mark.scenario("Redis kill -9 and restart")
@pytest.mark.parametrize("target", ["redis"], indirect=True)
@pytest.mark.parametrize(
    "fsync", [pytest.param("always", marks=redis_config(True, "always")),
              pytest.param("everysec", marks=redis_config(True, "everysec"))],
)  # fmt: skip
@pytest.mark.asyncio
async def test_redis_kill_and_restart_under_load_with_the_aof(
    scene: Scene, target: Target, fsync: str
) -> None:
    scene.ledger.scenario = f"Redis kill -9 and restart, AOF {fsync}"
    server = target.redis
    assert server is not None
    assert server.appendfsync == fsync
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        await fleet(scene)
        feed = producer(scene)
        producing = asyncio.ensure_future(feed.run())
        await asyncio.sleep(STRIKE_AFTER_S)
        killed_at = time.time()
        async with scene.window(f"redis kill -9 (AOF {fsync})"):
            server.kill()
            await asyncio.to_thread(server.start)
        outage = scene.faults[-1].end - scene.faults[-1].start
        await producing
        ledger = await scene.settle(app)
    print(f"\nrestart took {outage:.2f} s; the producer retried {feed.retries} enqueues")
    if fsync == "always":
        ledger.check(duplicated=0 if outage < LEASE_S else None)
    else:
        # everysec may lose the last second of writes, nothing older
        older = [k for k in ledger.lost_keys if ledger.acked_at[k] < killed_at - 1.0]
        assert not older, f"everysec lost writes acknowledged over 1 s before the kill: {older}"
        ledger.check(lost=len(ledger.lost_keys))


@pytest.mark.scenario("Redis SHUTDOWN NOSAVE without persistence (loss expected)")
@pytest.mark.parametrize("target", ["redis"], indirect=True)
@pytest.mark.redis_server(appendonly=False, appendfsync="everysec")
@pytest.mark.asyncio
async def test_redis_shutdown_nosave_without_persistence_loses_what_was_acknowledged(
    scene: Scene, target: Target
) -> None:
    server = target.redis
    assert server is not None
    assert not server.appendonly
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        await fleet(scene, 2)
        # acknowledged, not yet due: still waiting when the server goes
        waiting = [f"waiting-{n}" for n in range(10)]
        scene.ledger.acknowledge_all(
            waiting,
            await work.enqueue_many([Work(key=k) for k in waiting], delay=timedelta(minutes=1)),
        )
        async with scene.window("redis SHUTDOWN NOSAVE (appendonly no)"):
            await server.shutdown_nosave()
            await asyncio.to_thread(server.start)
        after = [f"after-{n}" for n in range(10)]
        scene.ledger.acknowledge_all(after, await work.enqueue_many([Work(key=k) for k in after]))
        ledger = await scene.settle(app, bound_s=15)
        # the loss is announced: a worker notices the server came back empty
        await until(
            lambda: any(p.lines("jobs.redis.data-lost") for p in scene.procs),
            what="a worker to log jobs.redis.data-lost",
            timeout_s=10,
        )
    ledger.check(lost=len(waiting))
    assert sorted(ledger.lost_keys) == sorted(waiting), (
        "a job acknowledged after the restart was lost"
    )
