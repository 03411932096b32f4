"""The scheduler's lifecycle on the memory backend: start once, the two-phase drain, release or not."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest
from pydantic import BaseModel

from xjobs import App, ManualClock, job, task
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import SchedulerState, TaskFire
from xjobs.errors import XJobsError
from xjobs.memory.plugin import open_backend

pytestmark = pytest.mark.asyncio

HOUR = 3_600_000


class At(BaseModel):
    at: str


@job(tenant="none", idempotency_key=lambda value: value.at)
async def report(ctx: object, value: At) -> None:
    """The job the task fires."""


hourly = task(
    job=report, cron="0 * * * *", tz="UTC", input=lambda at: At(at=at.isoformat()), name="hourly"
)


class HeldFire:
    """The memory scheduler state, with each `fire` held until the test lets it through."""

    def __init__(self, inner: SchedulerState) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        return await self.inner.watermarks(tasks)

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        return await self.inner.arm(task, previous_ms, watermark_ms)

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        self.entered.set()
        await self.go.wait()
        return await self.inner.fire(task, previous_ms, occurrence_ms, job)

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        return await self.inner.task_fires(tasks)

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        return await self.inner.paused(tasks)

    async def pause(self, task: str) -> bool:
        return await self.inner.pause(task)

    async def resume(self, task: str) -> bool:
        return await self.inner.resume(task)


async def held_app(clock: ManualClock) -> tuple[App, HeldFire]:
    backend = await open_backend("memory://", clock=clock)
    assert backend.scheduler is not None
    held = HeldFire(backend.scheduler)
    app = App(replace(backend, scheduler=held), tasks=[hourly], clock=clock, retention=None)
    return await app.open(), held


async def test_a_scheduler_starts_once() -> None:
    async with App("memory://", tasks=[hourly]) as app:
        scheduler = app.scheduler()
        await scheduler.start()
        with pytest.raises(XJobsError) as caught:
            await scheduler.start()
        assert caught.value.code == "XJOBS_WORKER_STATE"
        await scheduler.close()
        assert scheduler.state == "closed"


async def test_an_app_without_tasks_has_no_scheduler() -> None:
    # retention=None: the default policy's purge task is a task too
    async with App("memory://", jobs=[report], retention=None) as app:
        with pytest.raises(XJobsError) as caught:
            app.scheduler()
        assert caught.value.code == "XJOBS_APP_STATE"


async def test_close_waits_out_the_round_then_releases_leadership() -> None:
    clock = ManualClock()
    app, held = await held_app(clock)
    scheduler = app.scheduler()
    await scheduler.tick()
    clock.advance(HOUR)
    round_ = asyncio.ensure_future(scheduler.tick())
    await held.entered.wait()
    closing = asyncio.ensure_future(scheduler.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # the fire in flight is waited for
    held.go.set()
    await closing
    await round_
    assert scheduler.stats.fired == 1
    assert app.backend.leader is not None
    assert await app.backend.leader.acquire("standby", 30_000)  # released: taken at once


async def test_an_abandoned_round_does_not_release_leadership(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    app, held = await held_app(clock)
    scheduler = app.scheduler(drain_timeout=timedelta(milliseconds=50))
    await scheduler.tick()
    clock.advance(HOUR)
    round_ = asyncio.ensure_future(scheduler.tick())
    await held.entered.wait()
    await scheduler.close()
    assert "jobs.scheduler.drain-abandoned" in caplog.text
    assert app.backend.leader is not None
    assert not await app.backend.leader.acquire("standby", 30_000)  # the lease must lapse first
    clock.advance(30_000)
    assert await app.backend.leader.acquire("standby", 30_000)
    round_.cancel()
    await asyncio.gather(round_, return_exceptions=True)


async def test_run_scheduler_returns_its_stats_once_stopped() -> None:
    async with App("memory://", tasks=[hourly]) as app:
        running = asyncio.ensure_future(app.run_scheduler(handle_signals=False))
        await asyncio.sleep(0.05)
        assert not running.done()
        # the one scheduler of this app leads: nobody else can take the memory lease
        assert app.backend.leader is not None
        assert not await app.backend.leader.acquire("standby", 30_000)
        running.cancel()  # a task cancelled from outside still closes (and releases) on its way out
        await asyncio.gather(running, return_exceptions=True)
        assert await app.backend.leader.acquire("standby", 30_000)
