"""The transactional outbox on Django's own SQLite connection (issue 42): with `OPTIONS["outbox"]`
and the xjobs-sqlite backend on the project's database file, an enqueue in `transaction.atomic()`
is staged in Django's transaction: a rollback stages nothing, a commit stages the job, which the
relay publishes and a worker runs."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import override_settings
from django_worker import POLL_S, PROJECT, WITHIN_S
from shop.models import Order
from shop.tasks import mark_paid

from xjobs.errors import OptionInvalidError
from xjobs_django import run_relay, run_worker
from xjobs_django.options import read_options
from xjobs_django.portal import close_portal


def _staged(db: str) -> int:
    """How many rows the xjobs outbox in Django's file holds (read on a connection of its own)."""
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("select count(*) from outbox").fetchone()
        return int(count)


@pytest.fixture
def django_db() -> Iterator[str]:
    """The project's `TASKS` on xjobs-sqlite in Django's own database file, with the outbox."""
    db = str(settings.DATABASES["default"]["NAME"])
    tasks = {
        "default": {
            "BACKEND": "xjobs_django.XJobsBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": f"sqlite:///{db}", "outbox": True},
        }
    }
    with override_settings(TASKS=tasks):
        try:
            # the enqueueing side of Django's own file installs nothing (see store.py)
            call_command("xjobs_install", stdout=io.StringIO())
            yield db
        finally:
            close_portal()


class Rejected(Exception):
    pass


def _enqueue_then_reject(db: str, before: int, enqueued: list[str]) -> None:
    with transaction.atomic():
        rejected = Order.objects.create(total_cents=100)
        enqueued.append(mark_paid.enqueue(rejected.pk).id)
        assert _staged(db) == before  # not committed: another connection sees nothing
        raise Rejected


def test_a_rollback_stages_nothing_and_a_commit_stages_the_job_the_worker_runs(
    django_db: str,
) -> None:
    mark_paid.enqueue(0)  # outside a transaction: written at once (and opens the backend)
    assert asyncio.run(run_worker(until_idle=True)).claimed == 1  # no order 0: it fails
    before = _staged(django_db)

    rolled_back: list[str] = []
    with pytest.raises(Rejected):
        _enqueue_then_reject(django_db, before, rolled_back)
    assert _staged(django_db) == before
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(rolled_back[0])

    with transaction.atomic():
        order = Order.objects.create(total_cents=250)
        paid = mark_paid.enqueue(order.pk)
        before_the_commit = paid.enqueued_at  # staged, not yet committed
    assert before_the_commit is None
    assert paid.enqueued_at is not None
    assert _staged(django_db) == before + 1
    with pytest.raises(TaskResultDoesNotExist):  # staged: a job once the relay publishes it
        default_task_backend.get_result(paid.id)

    assert asyncio.run(run_relay(until_idle=True)).published == 1
    assert default_task_backend.get_result(paid.id).status == TaskResultStatus.READY
    assert asyncio.run(run_worker(until_idle=True)).completed == 1
    done = default_task_backend.get_result(paid.id)
    assert (done.status, done.return_value) == (TaskResultStatus.SUCCESSFUL, 250)
    assert Order.objects.get(pk=order.pk).paid


def test_the_outbox_needs_a_database_whose_transactions_it_stages_in() -> None:
    with pytest.raises(OptionInvalidError, match='"outbox"'):
        read_options("default", {"url": "sqlite:///x.db", "outbox": True, "database": None})
    with pytest.raises(OptionInvalidError, match='"outbox"'):
        read_options("default", {"url": "sqlite:///x.db", "outbox": "yes"})


def test_xjobs_relay_publishes_what_a_commit_staged_and_drains_on_sigterm(django_db: str) -> None:
    with transaction.atomic():
        order = Order.objects.create(total_cents=40)
        paid = mark_paid.enqueue(order.pk)
    env = {**os.environ, "SHOP_XJOBS_URL": f"sqlite:///{django_db}", "PYTHONUNBUFFERED": "1"}
    relay = subprocess.Popen(
        [sys.executable, "manage.py", "xjobs_relay"],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WITHIN_S
        while not _published(paid.id):
            assert relay.poll() is None, relay.communicate()[1]
            assert time.monotonic() < deadline, "the relay published nothing"
            time.sleep(POLL_S)
        relay.send_signal(signal.SIGTERM)
        _, err = relay.communicate(timeout=WITHIN_S)
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.communicate()
    assert relay.returncode == 0, err
    assert "relay stopped: id=" in err
    assert default_task_backend.get_result(paid.id).status == TaskResultStatus.READY


def _published(result_id: str) -> bool:
    try:
        default_task_backend.get_result(result_id)
    except TaskResultDoesNotExist:
        return False
    return True
