"""End to end: a real `xjobs worker` process drains on SIGTERM; its job ends or is interrupted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
STARTED_WITHIN_S = 20.0
POLL_S = 0.05


def _start_worker(
    module_flag: str, tmp_path: Path, sleep_s: float, *extra: str
) -> tuple[subprocess.Popen[str], Path, Path]:
    started, finished = tmp_path / "started", tmp_path / "finished"
    env = {
        **os.environ,
        "XJOBS_E2E_STARTED": str(started),
        "XJOBS_E2E_FINISHED": str(finished),
        "XJOBS_E2E_SLEEP": str(sleep_s),
    }
    command = [sys.executable, "-m", module_flag, "worker", "sigterm_app:app", *extra]
    # cwd is this directory: `load_app` puts the current directory first on sys.path.
    process = subprocess.Popen(
        command, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return process, started, finished


def _wait_for(marker: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + STARTED_WITHIN_S
    while not marker.exists():
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"the worker exited {process.returncode} before its job started:\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            _, err = process.communicate()
            pytest.fail(f"the job did not start within {STARTED_WITHIN_S}s:\n{err}")
        time.sleep(POLL_S)


def _stop(process: subprocess.Popen[str], within_s: float) -> tuple[int, str, float]:
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=within_s)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"the worker did not exit within {within_s}s of SIGTERM:\n{err}")
    return process.returncode, err, time.monotonic() - sent


def _stats(stderr: str) -> dict[str, int]:
    lines = [line for line in stderr.splitlines() if "worker stopped:" in line]
    assert len(lines) == 1, stderr
    return {k: int(v) for k, v in re.findall(r"\b(\w+)=(\d+)\b", lines[0])}


def test_sigterm_lets_the_running_job_finish_then_exits_0(tmp_path: Path) -> None:
    process, started, finished = _start_worker("xjobs_cli", tmp_path, 1.5)
    _wait_for(started, process)

    code, stderr, _ = _stop(process, within_s=15.0)

    assert code == 0, stderr
    assert finished.exists(), stderr
    assert _stats(stderr)["completed"] == 1, stderr
    assert re.search(
        r"jobs.worker.started worker_id=[0-9a-f-]{36} queues=default backend=memory", stderr
    ), stderr


def test_sigterm_past_the_drain_timeout_interrupts_the_job_and_exits_0(tmp_path: Path) -> None:
    process, started, finished = _start_worker(
        "xjobs_cli.main", tmp_path, 10.0, "--drain-timeout", "0.5"
    )
    _wait_for(started, process)

    code, stderr, took_s = _stop(process, within_s=8.0)

    assert code == 0, stderr
    assert took_s < 5.0, stderr
    assert not finished.exists(), stderr
    stats = _stats(stderr)
    assert (stats["interrupted"], stats["completed"]) == (1, 0), stderr


def test_the_console_script_prints_the_version() -> None:
    script = Path(sys.executable).with_name("xjobs")
    if not script.exists():
        pytest.skip(f"no xjobs console script beside {sys.executable}")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("xjobs "), done.stdout
