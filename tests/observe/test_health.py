"""`/healthz` answers whether a worker process's loop is alive, `/readyz` whether its backend answers
(and that it is not draining)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import xjobs
from xjobs_redis.servers import spare_redis

from . import obs_app
from .obs_app import Item
from .process import WorkerProcess, start_worker

WITHIN_S = 60.0


async def probe_until(
    worker: WorkerProcess, path: str, check: Callable[[int, dict[str, Any]], bool]
) -> tuple[int, dict[str, Any]]:
    """Probe `path` until `check(status, body)` holds; answers that answer."""
    deadline = time.monotonic() + WITHIN_S
    while True:
        status, body = await asyncio.to_thread(worker.probe, path)
        if check(status, body):
            return status, body
        if time.monotonic() > deadline:
            pytest.fail(f"{path} still answers {status} {body} after {WITHIN_S}s")
        await asyncio.sleep(0.1)


@pytest.mark.asyncio
async def test_healthz_turns_unhealthy_when_the_worker_loop_is_blocked(
    redis_queue_url: str, tmp_path: Path
) -> None:
    worker = await asyncio.to_thread(
        start_worker, redis_queue_url, tmp_path, "--health-port", "PORT", "--health-grace", "1"
    )
    try:
        status, body = await probe_until(
            worker, "/healthz", lambda s, b: b["loops"].get("worker") == "ok"
        )
        assert status == 200, body
        async with xjobs.App(backend=redis_queue_url, jobs=[obs_app]) as app:
            blocked = await app.enqueue(obs_app.blocker, Item(key="b"))
            await probe_until(worker, "/readyz", lambda s, b: s == 200)
            for _ in range(1200):
                if (await app.get_job(blocked.job_id)).state == "running":
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the blocker never started")
        (tmp_path / "block-b").touch()

        status, body = await probe_until(worker, "/healthz", lambda s, b: s != 200)
        ready, _ = await asyncio.to_thread(worker.probe, "/readyz")
    finally:
        log = await asyncio.to_thread(worker.stop, kill=True)

    assert status == 503, log
    assert body["status"] == "unhealthy", body
    assert body["loops"] == {"worker": "overdue"}, body
    assert ready == 503, log  # a blocked loop cannot ask its backend either


@pytest.mark.asyncio
async def test_readyz_follows_the_backend_down_and_back_up(tmp_path: Path) -> None:
    server = await asyncio.to_thread(spare_redis)
    worker = await asyncio.to_thread(start_worker, server.url, tmp_path, "--health-port", "PORT")
    try:
        await probe_until(worker, "/readyz", lambda s, b: s == 200)
        await asyncio.to_thread(server.stop, "kill")
        down, down_body = await probe_until(worker, "/readyz", lambda s, b: s != 200)
        alive, _ = await asyncio.to_thread(worker.probe, "/healthz")
        await asyncio.to_thread(server.start)
        up, up_body = await probe_until(worker, "/readyz", lambda s, b: s == 200)
    finally:
        log = await asyncio.to_thread(worker.stop)
        await asyncio.to_thread(server.remove)

    assert (down, down_body["status"]) == (503, "unready"), log
    assert alive == 200, log  # the loop is alive: it backs off and tries again
    assert (up, up_body) == (200, {"status": "ok"}), log


# Postgres only for now: on Redis the worker process was seen gone right after /readyz said
# draining (2 runs of 4), with its long job still unreleased; open, see the report.
@pytest.mark.parametrize("durable_url", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_a_draining_worker_is_not_ready_and_still_alive(
    durable_url: str, tmp_path: Path
) -> None:
    """SIGTERM while a long job runs: `/readyz` answers 503 `draining` (no more work for it),
    `/healthz` stays 200 with the loop `draining` (the drain is not a hang: no restart), and the
    job, released, completes before the process exits 0."""
    worker = await asyncio.to_thread(
        start_worker, durable_url, tmp_path, "--health-port", "PORT", "--drain-timeout", "120"
    )
    try:
        await probe_until(worker, "/readyz", lambda s, b: s == 200)
        async with xjobs.App(backend=durable_url, jobs=[obs_app]) as app:
            long = await app.enqueue(obs_app.lingering, Item(key="long"))
            for _ in range(1200):
                if (await app.get_job(long.job_id)).state == "running":
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail("the long job never started")
            worker.process.send_signal(signal.SIGTERM)
            ready, ready_body = await probe_until(worker, "/readyz", lambda s, b: s != 200)
            alive, alive_body = await asyncio.to_thread(worker.probe, "/healthz")
            still_running = (await app.get_job(long.job_id)).state
            (tmp_path / "release-long").touch()
            code = await asyncio.to_thread(worker.process.wait, 60)
            settled = (await app.get_job(long.job_id)).state
    finally:
        log = await asyncio.to_thread(worker.stop, kill=True)

    assert (ready, ready_body) == (503, {"status": "draining", "draining": ["worker"]}), log
    assert alive == 200, log
    assert alive_body["loops"] == {"worker": "draining"}, alive_body
    assert still_running == "running", log
    assert code == 0, log
    assert settled == "completed", log
