"""End to end: a backfill whose worker is killed with `kill -9` mid-sweep resumes at its cursor.

The sweep is killed inside a batch's step (the batch handled, its step not recorded); a new
worker resumes it once the dead worker's lease lapses: the recorded batches replay from their
steps (not fetched, not handled, not recorded again), the batch in flight runs again (handle is
at least once), and the ledger ends with every row counted once. On Postgres and on Redis,
through the real `xjobs worker` process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import xjobs
from xjobs.contract.backfills import BackfillRow

HERE = Path(__file__).parent
WAIT_S = 30.0
POLL_S = 0.05
LEASE_S = "1"


def _worker(url: str, tmp_path: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "XJOBS_E2E_URL": url,
        "XJOBS_E2E_CALLS": str(tmp_path / "calls"),
        "XJOBS_E2E_MID": str(tmp_path / "mid"),
    }
    env.pop("XJOBS_ENVIRONMENT", None)
    command = [sys.executable, "-m", "xjobs_cli", "worker", "backfill_app:app", "--lease", LEASE_S]
    return subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(what: str, ready: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the worker exited {process.returncode} before {what}:\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            _, err = process.communicate()
            pytest.fail(f"{what} did not happen within {WAIT_S}s:\n{err}")
        time.sleep(POLL_S)


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"the worker did not exit within {WAIT_S}s of SIGTERM")


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def _app_module() -> ModuleType:
    sys.path.insert(0, str(HERE))
    try:
        import backfill_app
    finally:
        sys.path.remove(str(HERE))
    return backfill_app


async def _enqueue(url: str) -> xjobs.EnqueueResult:
    module = _app_module()
    handle = module.sweep
    async with xjobs.App(backend=url, jobs=[handle]) as app:
        return await app.enqueue(handle, {})


async def _ledger_row(url: str, run_id: str) -> BackfillRow | None:
    async with xjobs.App(backend=url) as app:
        assert app.backend.backfills is not None
        return await app.backend.backfills.get(run_id)


async def _finished(url: str, job_id: str) -> tuple[xjobs.JobRecord, list[str]]:
    deadline = time.monotonic() + WAIT_S
    async with xjobs.App(backend=url) as app:
        while (record := await app.get_job(job_id)).state != "completed":
            assert time.monotonic() < deadline, f"the sweep is still {record.state}"
            assert record.state not in ("failed", "dead", "cancelled"), record.last_error
            await asyncio.sleep(POLL_S)
        return record, [s.name for s in await app.get_steps(job_id)]


@pytest.mark.asyncio
async def test_a_sweep_killed_mid_batch_resumes_at_its_cursor_and_records_no_batch_twice(
    durable_url: str, tmp_path: Path
) -> None:
    result = await _enqueue(durable_url)
    first = _worker(durable_url, tmp_path)
    _wait_for("the batch holding id 10", (tmp_path / "mid").exists, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=WAIT_S)

    killed = await _ledger_row(durable_url, result.run_id)
    assert killed is not None
    assert (killed.status, killed.count, killed.batches, killed.cursor) == (
        "running",
        9,
        3,
        "9",
    )

    second = _worker(durable_url, tmp_path)
    try:
        record, steps = await _finished(durable_url, result.job_id)
    finally:
        _stop(second)

    assert (record.run_id, record.attempt) == (result.run_id, 2)
    assert steps == [f"batch-{i}" for i in range(10)]  # each batch recorded once
    row = await _ledger_row(durable_url, result.run_id)
    assert row is not None
    assert (row.status, row.count, row.batches) == ("completed", 30, 10)

    calls = _calls(tmp_path)
    fetches = [c.split()[1:] for c in calls if c.startswith("fetch")]
    pids = list(dict.fromkeys(pid for pid, _ in fetches))
    assert len(pids) == 2
    resumed = [cursor for pid, cursor in fetches if pid == pids[1]]
    assert resumed[0] == "9"  # the second worker fetched from the cursor the first recorded
    handled = Counter(int(i) for c in calls if c.startswith("handled") for i in c.split()[1:])
    assert sorted(handled) == list(range(1, 31))
    assert {i for i, n in handled.items() if n > 1} == {10, 11, 12}  # only the batch in flight
