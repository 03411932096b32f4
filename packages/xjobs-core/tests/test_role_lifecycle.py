"""The one role lifecycle: the worker, the scheduler and the relay are each a `Role`, and `App`'s run
frame drives every one of them the same way (start, wait, close; SIGTERM drains, a second one cuts)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest
from pydantic import BaseModel

from xjobs import App, Relay, Role, RoleStats, job, task
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import OutboxStore
from xjobs.errors import XJobsError
from xjobs.roles.relay_options import resolve_relay_options

pytestmark = pytest.mark.asyncio


class Day(BaseModel):
    day: str


@job(tenant="none", idempotency_key=lambda value: value.day)
async def report(ctx: object, value: Day) -> None:
    """The job every role here serves, fires or relays."""


nightly = task(job=report, cron="0 3 * * *", tz="UTC", input=lambda at: Day(day=str(at)))

ROLES: dict[str, Callable[[App], Role]] = {
    "worker": lambda app: app.worker(),
    "scheduler": lambda app: app.scheduler(),
    "relay": lambda app: app.relay(),
}


class HeldClaim:
    """An outbox whose `claim` is held until the test lets it through (or cancels it)."""

    def __init__(self, inner: OutboxStore) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.go = asyncio.Event()

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        self.entered.set()
        await self.go.wait()
        return await self.inner.claim(relay_id, limit, lease_ms)

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        return await self.inner.mark_published(relay_id, ids)


@pytest.mark.parametrize("kind", list(ROLES))
async def test_each_long_running_role_is_a_role(kind: str) -> None:
    async with App("memory://", jobs=[report], tasks=[nightly]) as app:
        role: Role = ROLES[kind](app)
        assert isinstance(role, Role)
        assert role.state == "new"


@pytest.mark.parametrize("kind", list(ROLES))
async def test_a_role_s_stats_are_its_counts_by_name_under_its_id(kind: str) -> None:
    async with App("memory://", jobs=[report], tasks=[nightly]) as app:
        role = ROLES[kind](app)
        stats: RoleStats = role.stats
        assert stats.role_id == role.id
        counts = stats.as_dict()
        assert counts == dict.fromkeys(counts, 0)
        assert not any(name.endswith("_id") for name in counts)


async def test_a_scheduler_refuses_until_idle_it_runs_until_stopped() -> None:
    async with App("memory://", tasks=[nightly]) as app:
        scheduler = app.scheduler()
        with pytest.raises(XJobsError) as caught:
            await scheduler.start(until_idle=True)
        assert caught.value.code == "XJOBS_OPTION_INVALID"
        assert scheduler.state == "new"


async def test_interrupt_stops_a_running_worker_from_claiming() -> None:
    async with App("memory://", jobs=[report]) as app:
        worker = app.worker()
        await worker.start()
        worker.interrupt()
        interrupted = worker.state
        await worker.close()
        assert interrupted == "draining"
        assert worker.state == "closed"


async def test_a_drain_timeout_given_to_stop_accepting_bounds_the_relay_s_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with App("memory://", jobs=[report]) as app:
        assert app.backend.outbox is not None
        held = HeldClaim(app.backend.outbox)
        relay = Relay(outbox=held, jobs=app.backend.jobs, options=resolve_relay_options())  # type: ignore[arg-type]
        await relay.start()
        await held.entered.wait()
        relay.stop_accepting(drain_timeout_ms=50)  # the option's own bound is 30 s
        async with asyncio.timeout(5):
            await relay.close()
        assert "jobs.relay.drain-abandoned" in caplog.text


async def test_run_worker_runs_the_start_hook_before_and_the_stop_hook_after_the_worker() -> None:
    seen: list[str] = []

    async def on_start(app: App) -> None:
        seen.append("start")

    async def on_stop(app: App) -> None:
        seen.append("stop")

    async with App(
        "memory://", jobs=[report], on_worker_start=on_start, on_worker_stop=on_stop
    ) as app:
        await report.enqueue(Day(day="monday"))
        stats = await app.run_worker(until_idle=True)
    assert (seen, stats.completed) == (["start", "stop"], 1)


async def test_the_first_sigterm_drains_the_role_and_its_run_returns_the_stats(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO")
    async with App("memory://", jobs=[report]) as app:
        assert app.backend.outbox is not None
        passing = HeldClaim(app.backend.outbox)
        passing.go.set()
        app.backend.outbox = passing  # type: ignore[assignment]
        running = asyncio.ensure_future(app.run_relay(handle_signals=True))
        await passing.entered.wait()  # the relay runs: its signal handlers are in place
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(5):
            stats = await running
        app.backend.outbox = passing.inner
    assert "jobs.relay.draining" in caplog.text
    assert stats.passes >= 1


async def test_a_second_sigterm_cuts_the_drain_short(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    async with App("memory://", jobs=[report]) as app:
        assert app.backend.outbox is not None
        held = HeldClaim(app.backend.outbox)
        app.backend.outbox = held  # type: ignore[assignment]
        running = asyncio.ensure_future(
            app.run_relay(handle_signals=True, drain_timeout=timedelta(seconds=30))
        )
        await held.entered.wait()
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.05)
        assert "jobs.relay.draining" in caplog.text
        assert not running.done()  # the pass in flight is waited for, up to the drain timeout
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(5):
            await running
        app.backend.outbox = held.inner
