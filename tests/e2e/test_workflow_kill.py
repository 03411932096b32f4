"""End to end: a worker process killed with `kill -9` mid-workflow loses no recorded step.

A three-step job is killed after step two; a new worker resumes it (once the dead worker's lease
lapses) and steps one and two are not called again. A sleeping job survives a worker restart and
wakes at its recorded time. On Postgres and on Redis, through the real `xjobs worker` process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xjobs

HERE = Path(__file__).parent
WAIT_S = 30.0
POLL_S = 0.05
LEASE_S = "1"  # the dead worker's claim lapses after this
NAP_S = 3.0
# How late a wake may run: the lease of a worker that died holding nothing is moot; a parked job
# is found by the next idle pass, at most the idle backoff ceiling (5 s) after its time.
WAKE_SLACK_S = 8.0


def _worker(url: str, tmp_path: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "XJOBS_E2E_URL": url,
        "XJOBS_E2E_CALLS": str(tmp_path / "calls"),
        "XJOBS_E2E_AFTER_TWO": str(tmp_path / "after-two"),
        "XJOBS_E2E_NAP": str(NAP_S),
    }
    command = [sys.executable, "-m", "xjobs_cli", "worker", "workflow_app:app", "--lease", LEASE_S]
    return subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=WAIT_S)


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"the worker did not exit within {WAIT_S}s of SIGTERM:\n{err}")
    return err


def _wait_for(what: str, ready: object, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():  # type: ignore[operator]
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the worker exited {process.returncode} before {what}:\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            _, err = process.communicate()
            pytest.fail(f"{what} did not happen within {WAIT_S}s:\n{err}")
        time.sleep(POLL_S)


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


async def _job_state(url: str, job_id: str) -> xjobs.JobRecord:
    async with xjobs.App(backend=url) as app:
        return await app.get_job(job_id)


async def _enqueue(url: str, job_name: str) -> xjobs.EnqueueResult:
    sys.path.insert(0, str(HERE))
    try:
        import workflow_app
    finally:
        sys.path.remove(str(HERE))
    handle = getattr(workflow_app, job_name)
    async with xjobs.App(backend=url, jobs=[handle]) as app:
        return await app.enqueue(handle, workflow_app.Order(order_id=f"o-{time.time_ns()}"))


@pytest.mark.asyncio
async def test_a_worker_killed_after_step_two_resumes_without_calling_one_and_two(
    durable_url: str, tmp_path: Path
) -> None:
    result = await _enqueue(durable_url, "three_steps")
    first = _worker(durable_url, tmp_path)
    _wait_for("step two", (tmp_path / "after-two").exists, first)
    _kill(first)
    assert _calls(tmp_path) == ["one", "two"]

    second = _worker(durable_url, tmp_path)
    try:
        _wait_for("step three", lambda: "three" in _calls(tmp_path), second)
        deadline = time.monotonic() + WAIT_S
        while (record := await _job_state(durable_url, result.job_id)).state != "completed":
            assert time.monotonic() < deadline, f"the job is still {record.state}"
            await asyncio.sleep(POLL_S)
    finally:
        _stop(second)
    assert _calls(tmp_path) == ["one", "two", "three"]
    assert (record.run_id, record.attempt) == (result.run_id, 2)


@pytest.mark.asyncio
async def test_a_sleeping_job_survives_a_worker_restart_and_wakes_on_time(
    durable_url: str, tmp_path: Path
) -> None:
    result = await _enqueue(durable_url, "sleeper")
    first = _worker(durable_url, tmp_path)
    _wait_for("the sleep", lambda: "before" in _calls(tmp_path), first)
    deadline = time.monotonic() + WAIT_S
    while (parked := await _job_state(durable_url, result.job_id)).state != "waiting":
        assert time.monotonic() < deadline, f"the job is still {parked.state}"
        await asyncio.sleep(POLL_S)
    _kill(first)

    second = _worker(durable_url, tmp_path)
    try:
        _wait_for("the wake", lambda: any(c.startswith("woke") for c in _calls(tmp_path)), second)
    finally:
        _stop(second)
    before, woke = _calls(tmp_path)
    woke_at = float(woke.split()[1])
    wake_at = parked.run_at_ms / 1000
    assert before == "before"
    assert wake_at <= woke_at < wake_at + WAKE_SLACK_S
    assert (await _job_state(durable_url, result.job_id)).state == "completed"
