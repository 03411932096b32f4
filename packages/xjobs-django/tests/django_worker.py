"""`manage.py xjobs_worker` as a real process of the test project, and waiting on what it does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.tasks import TaskResult, default_task_backend

PROJECT = Path(__file__).resolve().parent / "djproject"
# Bounds on waiting for a worker (not timings under test: a slow machine only waits longer).
WITHIN_S = 60.0
POLL_S = 0.05


def start_worker(url: str, *flags: str) -> subprocess.Popen[str]:
    """`python manage.py xjobs_worker FLAGS` in the project, on `url` and the tests' database."""
    env = {**os.environ, "SHOP_XJOBS_URL": url, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "manage.py", "xjobs_worker", "--concurrency", "2", *flags]
    return subprocess.Popen(
        command, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _fail(process: subprocess.Popen[str], why: str) -> None:
    if process.poll() is None:
        process.kill()
    _, err = process.communicate()
    pytest.fail(f"{why}; the worker said:\n{err}")


def finished(result_id: str, process: subprocess.Popen[str]) -> TaskResult[..., Any]:
    """The task result once it is finished, read through the backend while the worker runs."""
    deadline = time.monotonic() + WITHIN_S
    while True:
        found = default_task_backend.get_result(result_id)
        if found.is_finished:
            return found
        if process.poll() is not None:
            _fail(process, f"the worker exited {process.returncode} before task {result_id} ended")
        if time.monotonic() > deadline:
            _fail(process, f"task {result_id} is still {found.status} after {WITHIN_S}s")
        time.sleep(POLL_S)


def wait_for_file(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WITHIN_S
    while not path.exists():
        if process.poll() is not None:
            _fail(process, f"the worker exited {process.returncode} before {path.name} appeared")
        if time.monotonic() > deadline:
            _fail(process, f"{path.name} did not appear within {WITHIN_S}s")
        time.sleep(POLL_S)


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM the worker; it must drain and exit 0. Answers its stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=WITHIN_S)
    except subprocess.TimeoutExpired:
        _fail(process, f"the worker did not exit within {WITHIN_S}s of SIGTERM")
    assert process.returncode == 0, err
    return err


def kill(process: subprocess.Popen[str]) -> None:
    """kill -9: no drain, no settle; the lease is left to lapse."""
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=WITHIN_S)
