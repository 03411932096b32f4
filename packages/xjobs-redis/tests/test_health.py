"""The backend notices a server restart that lost its data (issue "The fault suite").

Each test starts a private redis-server (`spare_redis`), opens a backend on it, lets the wake
subscription go live, restarts the server under it, and waits for the wake to come back: its
re-subscription runs the check (the run_id moved; INFO persistence says what survived).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest

from xjobs.contract.backend import Backend
from xjobs.testing.rows import new_job
from xjobs_redis.backend import open_backend
from xjobs_redis.health import server_health
from xjobs_redis.servers import ServerUnavailable, redis_url, spare_redis, unavailable

WAIT_S = 20.0
DATA_LOST = "jobs.redis.data-lost"


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def restart_under(backend: Backend, restart: Callable[[], None]) -> str:
    """Restart the server under a live wake; answers the run_id the backend saw before."""
    assert backend.wake is not None
    unsubscribe = backend.wake.subscribe(lambda _queue: None)
    try:
        wake = backend.wake
        await until(lambda: wake.live, "the wake to go live")
        health = server_health(backend)
        assert health is not None
        before = str(health["run_id"])
        await asyncio.to_thread(restart)
        await until(lambda: health["run_id"] != before, "the check after the restart")
        return before
    finally:
        unsubscribe()


@pytest.mark.asyncio
async def test_the_baseline_at_open_reads_the_servers_run_id_and_persistence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On one server, and on a Cluster (`nox -s parity-redis-cluster` runs this file there),
    where it is read from the node that holds the queue set."""
    try:
        url = redis_url()
    except ServerUnavailable as exc:
        unavailable(f"no Redis server: {exc}")
    caplog.set_level(logging.WARNING, logger="xjobs_redis.health")
    backend = await open_backend(url, prefix="xjobs_t_baseline")
    try:
        health = server_health(backend)
    finally:
        await backend.close()
    assert health is not None
    assert [r.message for r in caplog.records if "failed" in r.message] == []
    assert health["run_id"]
    assert health["persistence"] in ("aof", "rdb", "none")
    assert health["eviction_policy"] == "noeviction"


@pytest.mark.asyncio
@pytest.mark.parametrize("appendonly", [False, True], ids=["no-persistence", "aof"])
async def test_a_restart_is_checked_for_lost_data(
    appendonly: bool, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        server = spare_redis(appendonly=appendonly)
    except ServerUnavailable as exc:
        unavailable(f"no restartable Redis server: {exc}")
    try:
        backend = await open_backend(server.url, prefix="xjobs_t_health")
        try:
            health = server_health(backend)
            assert health is not None
            assert health["persistence"] == ("aof" if appendonly else "none")
            await backend.jobs.enqueue([new_job(queue="health")])
            await asyncio.sleep(1.2 if appendonly else 0)  # past appendfsync everysec
            caplog.set_level(logging.WARNING, logger="xjobs_redis.health")

            def restart() -> None:
                server.stop("shutdown")
                server.start()

            await restart_under(backend, restart)
            lost = [r for r in caplog.records if r.getMessage() == DATA_LOST]
            if appendonly:
                assert (health["data_lost"], lost) == (False, [])
            else:
                assert health["data_lost"] is True
                assert [r.levelno for r in lost] == [logging.ERROR]
                assert "may_be_lost" in lost[0].__dict__
        finally:
            await backend.close()
    finally:
        server.remove()


@pytest.mark.asyncio
async def test_a_backend_without_a_wake_listener_is_not_checked_after_open() -> None:
    """The check rides the wake's (re)subscription only: no listener, no INFO (a known gap)."""
    try:
        server = spare_redis()
    except ServerUnavailable as exc:
        unavailable(f"no restartable Redis server: {exc}")
    try:
        backend = await open_backend(server.url, prefix="xjobs_t_health")
        try:
            health = server_health(backend)
            assert health is not None
            before = health["run_id"]

            def restart() -> None:
                server.stop("kill")
                server.start()

            await asyncio.to_thread(restart)
            await backend.jobs.enqueue([new_job(queue="health")])
            assert (health["run_id"], health["data_lost"]) == (before, False)
        finally:
            await backend.close()
    finally:
        server.remove()
