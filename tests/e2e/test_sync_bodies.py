"""End to end: plain `def` bodies in a real `xjobs worker` process, on Postgres and on Redis.

A body that holds the CPU for three leases keeps its lease (the event loop still heartbeats); a
body that never returns does not hold the process past the drain (its daemon thread is abandoned)
and its job goes back to `ready`, attempt unspent, for the next worker; a body that raises is
retried and dead-lettered like an `async def` one.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

import xjobs

HERE = Path(__file__).parent
WAIT_S = 30.0
POLL_S = 0.05
LEASE_S = 2.0
DRAIN_S = 2.0
# How long after the drain timeout the process may take to exit: settling the interrupted run,
# forgetting the worker, closing the backend.
EXIT_SLACK_S = 1.5


def _sync_app() -> ModuleType:
    sys.path.insert(0, str(HERE))
    try:
        import sync_app
    finally:
        sys.path.remove(str(HERE))
    return sync_app


@asynccontextmanager
async def _app(url: str) -> AsyncIterator[xjobs.App]:
    async with xjobs.App(backend=url, jobs=[_sync_app()]) as app:
        yield app


def _worker(url: str, runs: Path, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, "XJOBS_E2E_URL": url, "XJOBS_E2E_RUNS": str(runs)}
    command = [sys.executable, "-m", "xjobs_cli", "worker", "sync_app:app", *flags]
    # cwd is this directory: `load_app` puts the current directory first on sys.path.
    return subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _stop(process: subprocess.Popen[str], within_s: float = WAIT_S) -> tuple[int, str, float]:
    """SIGTERM, then the exit code, the log and how long the exit took."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"the worker did not exit within {within_s}s of SIGTERM:\n{err}")
    return process.returncode, err, time.monotonic() - sent


def _fail(process: subprocess.Popen[str], why: str) -> NoReturn:
    if process.poll() is None:
        process.kill()
    _, err = process.communicate()
    pytest.fail(f"{why}:\n{err}")


def _runs(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _wait_for_run(path: Path, line: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while line not in _runs(path):
        if process.poll() is not None:
            _fail(process, f"the worker exited {process.returncode} before {line!r} ran")
        if time.monotonic() > deadline:
            _fail(process, f"{line!r} did not run within {WAIT_S}s")
        await asyncio.sleep(POLL_S)


async def _wait_for_state(
    app: xjobs.App, job_id: str, state: str, process: subprocess.Popen[str]
) -> xjobs.JobRecord:
    deadline = time.monotonic() + WAIT_S
    while (record := await app.get_job(job_id)).state != state:
        if process.poll() is not None:
            _fail(process, f"the worker exited {process.returncode}; the job is {record.state}")
        if time.monotonic() > deadline:
            _fail(process, f"the job is still {record.state} after {WAIT_S}s, not {state}")
        await asyncio.sleep(POLL_S)
    return record


def _stats(stderr: str) -> dict[str, int]:
    lines = [line for line in stderr.splitlines() if "worker stopped:" in line]
    assert len(lines) == 1, stderr
    return {k: int(v) for k, v in re.findall(r"\b(\w+)=(\d+)\b", lines[0])}


@pytest.mark.asyncio
async def test_a_def_body_holding_the_cpu_for_three_leases_keeps_its_lease(
    durable_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    jobs = _sync_app()
    async with _app(durable_url) as app:
        result = await app.enqueue(jobs.crunch, jobs.Work(key="crunch", seconds=3 * LEASE_S))
        worker = _worker(durable_url, runs, "--lease", str(LEASE_S))
        try:
            await _wait_for_run(runs, "crunch 1", worker)
            held = await app.get_job(result.job_id)
            await asyncio.sleep(2 * LEASE_S)  # past the first claim's lease, the body still busy
            renewed = await app.get_job(result.job_id)
            done = await _wait_for_state(app, result.job_id, "completed", worker)
        finally:
            code, stderr, _ = _stop(worker)

    assert code == 0, stderr
    assert (held.state, renewed.state, renewed.claims) == ("running", "running", held.claims)
    assert held.lease_until_ms is not None
    assert renewed.lease_until_ms is not None
    # heartbeats from the event loop went on while the thread computed
    assert renewed.lease_until_ms >= held.lease_until_ms + LEASE_S * 1000, stderr
    assert (done.attempt, done.claims, done.last_error) == (1, held.claims, None)
    assert _runs(runs) == ["crunch 1", "crunched 1 cancelled=False"], stderr
    assert "jobs.lease.lost" not in stderr, stderr
    stats = _stats(stderr)
    assert (stats["claimed"], stats["completed"], stats["lease_lost"]) == (1, 1, 0), stderr


@pytest.mark.asyncio
async def test_a_def_body_that_never_returns_does_not_hold_the_drain(
    durable_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    jobs = _sync_app()
    async with _app(durable_url) as app:
        result = await app.enqueue(jobs.stubborn, jobs.Work(key="stubborn"))
        first = _worker(durable_url, runs, "--drain-timeout", str(DRAIN_S))
        try:
            await _wait_for_run(runs, "stubborn 1", first)
        finally:
            code, stderr, took_s = _stop(first, within_s=DRAIN_S + WAIT_S)
        back = await app.get_job(result.job_id)

        assert code == 0, stderr
        assert took_s < DRAIN_S + EXIT_SLACK_S, f"exited {took_s:.2f}s after SIGTERM:\n{stderr}"
        assert "jobs.worker.drain-abandoned" not in stderr, stderr
        stats = _stats(stderr)
        assert (stats["interrupted"], stats["completed"]) == (1, 0), stderr
        # interrupted: back to `ready` at once, the attempt handed back, the cut-off on record
        assert (back.state, back.attempt) == ("ready", 0), stderr
        assert back.last_error is not None
        assert "DrainingError" in back.last_error, back.last_error

        second = _worker(durable_url, runs)
        try:
            done = await _wait_for_state(app, result.job_id, "completed", second)
        finally:
            code, stderr, _ = _stop(second)

    assert code == 0, stderr
    assert (done.attempt, done.run_id) == (1, result.run_id)
    assert _runs(runs) == ["stubborn 1", "stubborn 1"], stderr
    assert _stats(stderr)["completed"] == 1, stderr


@pytest.mark.asyncio
async def test_a_def_body_that_raises_is_retried_and_dead_lettered_like_an_async_one(
    durable_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    jobs = _sync_app()
    async with _app(durable_url) as app:
        sync = await app.enqueue(jobs.explode, jobs.Work(key="explode"))
        async_ = await app.enqueue(jobs.explode_async, jobs.Work(key="explode-async"))
        worker = _worker(durable_url, runs)
        try:
            dead = await _wait_for_state(app, sync.job_id, "dead", worker)
            dead_async = await _wait_for_state(app, async_.job_id, "dead", worker)
        finally:
            code, stderr, _ = _stop(worker)

    assert code == 0, stderr
    attempts = jobs.RETRY.attempts
    for record, body in ((dead, "explode"), (dead_async, "explode_async")):
        assert (record.attempt, record.max_attempts) == (attempts, attempts), record
        assert record.last_error is not None, record
        head, *frames = record.last_error.splitlines()
        assert head == f"ValueError: boom on attempt {attempts}", record.last_error
        assert any("sync_app.py" in f and f"in {body}" in f for f in frames), record.last_error
        made = [line for line in _runs(runs) if line.split()[0] == body]
        assert made == [f"{body} {n}" for n in range(1, attempts + 1)], _runs(runs)
    stats = _stats(stderr)
    assert (stats["retried"], stats["dead_lettered"]) == (2 * (attempts - 1), 2), stderr
