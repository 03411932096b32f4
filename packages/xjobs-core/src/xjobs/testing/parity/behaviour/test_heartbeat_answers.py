"""Parity: a heartbeat is read as the boolean the contract promises; an answer that is neither is
the driver's error, a failed renewal (semantics.md, "Claims, leases and settlement")."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from xjobs import App, JobContext, job
from xjobs.contract.driver import Claim, JobDriver
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    QUEUE,
    CountingDriver,
    Item,
    eventually,
    key_of,
    org_of,
    within,
)

pytestmark = pytest.mark.xjobs_parity

# What a driver that breaks the contract answers: neither held (`True`) nor lost (`False`).
NOT_A_BOOLEAN: Any = None


class NoneAnsweringDriver(CountingDriver):
    """A job driver whose next `none_answers` heartbeats answer `None` without renewing."""

    def __init__(self, inner: JobDriver) -> None:
        super().__init__(inner)
        self.none_answers = 0
        self.answered_none = 0

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        """Answer `None` while `none_answers` lasts, then renew through the real driver."""
        if self.none_answers > 0:
            self.none_answers -= 1
            self.answered_none += 1
            return NOT_A_BOOLEAN  # type: ignore[no-any-return]
        return await super().heartbeat(claim, lease_ms)


def none_answering_app(parity: ParityEnv, body: object) -> tuple[App, NoneAnsweringDriver]:
    """An app over the scenario's backend whose job driver answers `None` to heartbeats on demand."""
    driver = NoneAnsweringDriver(parity.backend.jobs)
    backend = replace(parity.backend, jobs=driver)
    return App(backend, jobs=[body], clock=parity.clock), driver


class TestHeartbeatAnswers:
    async def test_a_heartbeat_answering_none_is_a_failed_renewal_not_a_lost_lease(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `heartbeat` answers a boolean, read as `held is False` for a lost lease: `None`
        is a driver error that only warns, like a renewal that raised, and the run goes on."""
        started, release = asyncio.Event(), asyncio.Event()
        seen: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            try:
                await release.wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        app, driver = none_answering_app(parity, body)
        async with app:
            result = await body.enqueue(Item())
            driver.none_answers = 1
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            await eventually(
                lambda: True in driver.heartbeats or bool(seen),
                what="a heartbeat answered None, then one that lands",
            )
            release.set()
            stats = await within(worker, what="the run to settle")
            record = await app.get_job(result.job_id)
        assert seen == []
        assert driver.answered_none == 1
        assert (record.state, stats.completed, stats.lease_lost) == ("completed", 1, 0)

    async def test_a_whole_window_of_none_answers_loses_the_lease(self, parity: ParityEnv) -> None:
        """Rule: a `None` answer never counts as held: a whole lease window of them is
        `jobs.lease.lost`, as a window of renewals that raised is, and cancels the run."""
        started = asyncio.Event()
        seen: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        app, driver = none_answering_app(parity, body)
        async with app:
            result = await body.enqueue(Item())
            driver.none_answers = 1_000
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            stats = await within(worker, what="the lease window to pass")
            record = await app.get_job(result.job_id)
        assert seen == ["cancelled"]
        assert driver.answered_none >= 2  # the first `None` only warned
        assert (stats.lease_lost, stats.completed) == (1, 0)
        assert (
            record.state == "running"
        )  # the lost run writes nothing; the lapsed lease is reclaimed
