"""End to end on the test project: a request enqueues, a real `manage.py xjobs_worker` runs it,
the result reads back, on Postgres and on Redis."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import Client
from django_worker import PROJECT, finished, kill, start_worker, stop, wait_for_file
from shop.models import Order
from shop.tasks import OutOfStock, slow_tally
from shop.views import ROLLED_BACK


def test_a_request_enqueues_and_the_worker_runs_its_tasks(xjobs_url: str) -> None:
    client = Client(raise_request_exception=False)
    rejected = client.post("/orders/rejected/", {"total_cents": "100"})
    assert rejected.status_code == 500
    rolled_back = ROLLED_BACK[-1]
    placed = client.post("/orders/", {"total_cents": "990", "sku": "MUG-9"})
    assert placed.status_code == 200, placed.content
    ids = placed.json()
    assert default_task_backend.get_result(ids["paid"]).status == TaskResultStatus.READY

    worker = start_worker(xjobs_url, "--queues", "default,emails")
    paid = finished(ids["paid"], worker)
    receipt = finished(ids["receipt"], worker)
    stock = finished(ids["stock"], worker)
    err = stop(worker)

    assert paid.status == TaskResultStatus.SUCCESSFUL
    assert paid.return_value == 990
    assert Order.objects.get(pk=ids["order"]).paid
    # the async task, on the emails queue, with its context
    assert receipt.status == TaskResultStatus.SUCCESSFUL
    assert receipt.return_value == {"order": ids["order"], "attempt": 1}
    assert receipt.task.queue_name == "emails"
    assert receipt.attempts == 1
    # a task that raised: FAILED at once, its exception's class path and traceback kept
    assert stock.status == TaskResultStatus.FAILED
    (error,) = stock.errors
    assert error.exception_class_path == "shop.tasks.OutOfStock"
    assert error.exception_class is OutOfStock
    assert "OutOfStock: no stock left for MUG-9" in error.traceback
    assert 'in reserve_stock\n    raise OutOfStock(f"no stock left for {sku}")' in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = stock.return_value
    # the rolled-back request's task was never written, so it never ran
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(rolled_back)
    assert not Order.objects.filter(total_cents=100).exists()
    # the worker's own account: exactly these three tasks were claimed
    stats = dict(re.findall(r"\b(\w+)=(\d+)\b", err.split("worker stopped:")[1]))
    assert (stats["claimed"], stats["completed"], stats["dead_lettered"]) == ("3", "2", "1"), err
    # the result as a view reads it, through the test client
    shown = client.get(f"/results/{ids['paid']}/").json()
    assert shown == {"status": "SUCCESSFUL", "return_value": 990, "errors": []}


def test_a_task_cut_by_kill_9_completes_once_on_a_fresh_worker(
    xjobs_url: str, tmp_path: Path
) -> None:
    result = slow_tally.enqueue(str(tmp_path), 3.0)
    first = start_worker(xjobs_url, "--lease", "2")
    wait_for_file(tmp_path / "started", first)
    kill(first)
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.RUNNING

    second = start_worker(xjobs_url, "--lease", "2")
    done = finished(result.id, second)
    stop(second)

    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 2  # the attempt that ran to the end
    assert done.attempts == 2
    assert (tmp_path / "started").read_text().split() == ["1", "2"]
    assert (tmp_path / "finished").read_text().split() == ["2"]


def test_sigterm_lets_the_running_task_finish_then_the_worker_exits_0(
    xjobs_url: str, tmp_path: Path
) -> None:
    result = slow_tally.enqueue(str(tmp_path), 1.0)
    worker = start_worker(xjobs_url)
    wait_for_file(tmp_path / "started", worker)
    err = stop(worker)

    assert "completed=1" in err, err
    assert (tmp_path / "finished").read_text().split() == ["1"]
    assert default_task_backend.get_result(result.id).return_value == 1


def test_xjobs_install_creates_the_backends_structures(xjobs_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "xjobs_install"],
        cwd=PROJECT,
        env={**os.environ, "SHOP_XJOBS_URL": xjobs_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.match(r"(postgres: installed|redis: nothing to install)", done.stdout), done.stdout


def test_a_refused_worker_command_says_why_and_exits_1() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "xjobs_worker", "--backend", "elsewhere"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "CommandError: XJOBS_OPTION_INVALID: TASKS has no backend 'elsewhere'" in done.stderr
