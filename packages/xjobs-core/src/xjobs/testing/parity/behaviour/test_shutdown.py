"""Parity: the worker's two-phase shutdown — stop accepting, then drain (semantics.md, "The worker")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from xjobs import JobContext, job
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    QUEUE,
    Item,
    SettledLog,
    counting_app,
    eventually,
    key_of,
    org_of,
    within,
)

pytestmark = pytest.mark.xjobs_parity

MARGIN = timedelta(milliseconds=50)


class TestDrain:
    async def test_a_quick_job_finishes_inside_the_drain(self, parity: ParityEnv) -> None:
        """Rule: `stop_accepting()` aborts nothing: a running job may finish until the cut-off."""
        started, release = asyncio.Event(), asyncio.Event()
        log = SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            result = await body.enqueue(Item())
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            worker.stop_accepting(drain_timeout_ms=1_000)
            release.set()
            await within(worker.close(), what="the drain")
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("completed", 1)
        assert (worker.stats.completed, worker.stats.interrupted) == (1, 0)
        assert log.outcomes() == ["completed"]

    async def test_a_long_job_is_interrupted_at_the_cut_off_and_handed_back(
        self, parity: ParityEnv
    ) -> None:
        """Rule: at the drain cut-off the run's signal aborts with XJOBS_DRAINING; it settles `interrupted` (retried, uncounted)."""
        started = asyncio.Event()
        seen: list[str] = []
        log = SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            result = await body.enqueue(Item())
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            worker.stop_accepting(drain_timeout_ms=150)  # the cut-off: 150 ms - 50 ms margin
            assert seen == []  # stop_accepting aborts nothing by itself
            await within(worker.close(), what="the drain cut-off")
            record = await app.get_job(result.job_id)
        assert seen == ["cancelled"]
        assert (record.state, record.attempt, record.claims) == ("ready", 0, 1)
        assert record.last_error is not None
        assert "XJOBS_DRAINING" in record.last_error
        assert (worker.stats.interrupted, worker.stats.retried) == (1, 0)
        assert log.events == []  # an interruption is not an ending

    async def test_an_interrupted_job_runs_again_on_the_next_worker(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an interrupted run is retried at once and its attempt was handed back."""
        started = asyncio.Event()
        attempts: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            attempts.append(ctx.attempt)
            started.set()
            if len(attempts) == 1:
                await asyncio.Event().wait()

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            worker.stop_accepting(drain_timeout_ms=100)
            await within(worker.close(), what="the drain cut-off")
            stats = await within(app.run_worker(until_idle=True), what="the next worker")
            record = await app.get_job(result.job_id)
        assert attempts == [1, 1]
        assert (record.state, record.attempt, record.claims) == ("completed", 1, 2)
        assert stats.completed == 1

    async def test_after_stop_accepting_nothing_new_is_claimed(self, parity: ParityEnv) -> None:
        """Rule: `stop_accepting()` stops claiming (and clears the poll timer)."""
        started, release = asyncio.Event(), asyncio.Event()
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)
            started.set()
            await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item(key="running"))
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            worker.stop_accepting(drain_timeout_ms=1_000)
            late = await body.enqueue(Item(key="late"))
            await asyncio.sleep(0.1)  # room for a worker that still claims to show it
            release.set()
            await within(worker.close(), what="the drain")
            record = await app.get_job(late.job_id)
        assert ran == ["running"]
        assert (record.state, record.attempt, record.claims) == ("ready", 0, 0)
        assert worker.stats.claimed == 1

    async def test_stop_lets_every_running_job_finish(self, parity: ParityEnv) -> None:
        """Rule: `stop()` stops claiming and lets every running job finish (no cut-off), then closes."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            worker = app.worker(drain_timeout=timedelta(milliseconds=100), drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            stopping = asyncio.create_task(worker.stop())
            await asyncio.sleep(0.2)  # past what a drain cut-off would have allowed
            release.set()
            await within(stopping, what="stop")
            record = await app.get_job(result.job_id)
        assert record.state == "completed"
        assert (worker.stats.completed, worker.stats.interrupted) == (1, 0)
        assert worker.state == "closed"


class TestShutdown:
    async def test_claims_of_the_round_the_drain_raced_go_back_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the drain waits out the claim round it races; claims held but not started go back uncounted."""
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app, driver = counting_app(parity, [body])
        async with app:
            results = await body.enqueue_many([Item(key="k-1"), Item(key="k-2")])
            driver.hold_claims = True
            worker = app.worker()
            await worker.start()
            await eventually(lambda: bool(driver.held), what="a claim round in flight")
            worker.stop_accepting(drain_timeout_ms=1_000)
            closing = asyncio.create_task(worker.close())
            await asyncio.sleep(0.05)
            joined_early = closing.done()
            driver.release_claims.set()
            await within(closing, what="the drain to wait out the claim round")
            records = [await app.get_job(r.job_id) for r in results]
        assert joined_early is False
        assert ran == []
        assert [(r.state, r.attempt, r.claims) for r in records] == [("ready", 0, 1)] * 2
        assert worker.stats.handed_back == 2
        assert (worker.stats.completed, worker.stats.interrupted) == (0, 0)

    async def test_a_worker_that_drains_refuses_to_start(self, parity: ParityEnv) -> None:
        """Rule: a worker starts once; `start()` refuses while it drains (XJOBS_WORKER_STATE)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            worker = app.worker()
            await worker.start()
            worker.stop_accepting()
            state = worker.state
            try:
                with pytest.raises(XJobsError) as refused:
                    await worker.start()
            finally:
                await worker.close()
        assert state == "draining"
        assert refused.value.code == "XJOBS_WORKER_STATE"

    async def test_close_is_joined_and_idempotent(self, parity: ParityEnv) -> None:
        """Rule: `close()` is the teardown, joined: a second call returns without error."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            worker = app.worker()
            await worker.start()
            await within(
                asyncio.gather(worker.close(), worker.close()), what="two concurrent closes"
            )
            await within(worker.close(), what="a third close")
            await within(worker.wait(), what="wait after close")
        assert worker.state == "closed"
