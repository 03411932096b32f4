"""The scheduler role under Django: the retention purge (on by default) is a cron task of the
backend's xjobs App; `manage.py xjobs_scheduler` leads and fires it, and a worker runs it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from django_worker import POLL_S, PROJECT, WITHIN_S
from shop.models import Order

from xjobs import ManualClock
from xjobs.errors import JobNotFoundError
from xjobs.factories.purge import PURGE_JOB
from xjobs.ids import new_id
from xjobs_django import worker_app
from xjobs_django.call import TaskCall

START = 1_767_225_630_000  # 2026-01-01T00:00:30Z: the purge's "*/5 * * * *" next fires at 00:05
DAY = 86_400_000


def test_the_purge_fires_under_django_and_removes_a_job_finished_days_ago(xjobs_url: str) -> None:
    order = Order.objects.create(total_cents=3)
    clock = ManualClock(START)
    app = worker_app(clock=clock)
    call = TaskCall(
        task="shop.tasks.mark_paid",
        args=[order.pk],
        kwargs={},
        backend="default",
        priority=0,
        token=new_id(),
    )

    async def scenario() -> None:
        async with app:
            old = await app.enqueue(app.jobs["django_task"], call)
            ran = await app.run_worker(until_idle=True, handle_signals=False)
            assert ran.completed == 1
            clock.advance(2 * DAY)  # finished two days ago: past the default day of retention
            scheduler = app.scheduler()
            await scheduler.tick()
            clock.advance(5 * 60_000)  # past the next five-minute occurrence
            await scheduler.tick()
            await scheduler.close()
            fired = (await app.task_fires())[PURGE_JOB]
            await app.run_worker(until_idle=True, handle_signals=False)
            assert (await app.get_job(fired.job_id)).state == "completed"
            with pytest.raises(JobNotFoundError):
                await app.get_job(old.job_id)

    asyncio.run(scenario())
    assert Order.objects.get(pk=order.pk).paid


async def _leader_held(url: str) -> bool:
    """Whether another candidate holds the scheduler's leadership now (a probe that does not
    take it: acquired, it is given back at once)."""
    app = worker_app()
    async with app:
        leader = app.backend.leader
        assert leader is not None
        probe = f"probe-{new_id()}"
        if await leader.acquire(probe, 1_000):
            await leader.release(probe)
            return False
        return True


def test_xjobs_scheduler_leads_until_sigterm_then_releases_and_exits_0(xjobs_url: str) -> None:
    env = {**os.environ, "SHOP_XJOBS_URL": xjobs_url, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "xjobs_scheduler"],
        cwd=PROJECT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + WITHIN_S
        while not asyncio.run(_leader_held(xjobs_url)):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the scheduler took no leadership"
            time.sleep(POLL_S)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=WITHIN_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "scheduler stopped: id=" in err
    assert not asyncio.run(_leader_held(xjobs_url))  # released on the way out
