"""Parity: plain `def` job bodies, run on threads with a sync context (semantics.md, "Execution")."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from xjobs import Retry, SyncJobContext, job
from xjobs.actor import current_actor
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, NOW_RETRY, QUEUE, Item, key_of, org_of, within

pytestmark = pytest.mark.xjobs_parity

LEASE_S = LEASE.total_seconds()


class TestPlainDefBodies:
    async def test_a_def_body_runs_on_a_thread_of_its_own_and_completes(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a plain `def` body runs off the event loop, with the run's identity and actor."""
        seen: dict[str, object] = {}
        loop_thread = threading.current_thread()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        def body(ctx: SyncJobContext, input: Item) -> None:
            actor = current_actor()
            seen.update(
                thread=threading.current_thread(),
                attempt=ctx.attempt,
                job_id=ctx.job_id,
                org=actor.org_id if actor is not None else None,
            )

        async with parity.app([body]) as app:
            result = await body.enqueue(Item(org="org-7"))
            stats = await within(app.run_worker(lease=LEASE, until_idle=True), what="the run")
            record = await app.get_job(result.job_id)
        assert (record.state, stats.completed) == ("completed", 1)
        assert seen["thread"] is not loop_thread
        assert (seen["attempt"], seen["job_id"], seen["org"]) == (1, result.job_id, "org-7")

    async def test_progress_reported_from_the_thread_is_stored(self, parity: ParityEnv) -> None:
        """Rule: `ctx.progress()` from a thread is throttled on the loop and flushed before the settle."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        def body(ctx: SyncJobContext, input: Item) -> None:
            ctx.progress(0.25)
            ctx.progress(0.75)

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the run")
            record = await app.get_job(result.job_id)
        assert record.progress == 0.75

    async def test_a_def_body_that_raises_is_retried_like_an_async_one(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the retry decision reads the error, whatever kind of body raised it."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        def body(ctx: SyncJobContext, input: Item) -> None:
            raise ValueError(f"attempt {ctx.attempt}")

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            for _ in range(NOW_RETRY.attempts):
                await within(app.run_worker(lease=LEASE, until_idle=True), what="a run")
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("dead", NOW_RETRY.attempts)
        assert record.last_error is not None
        assert record.last_error.startswith("ValueError: attempt 3")

    async def test_a_step_in_a_def_body_is_refused_with_a_code_that_says_async(
        self, parity: ParityEnv
    ) -> None:
        """Rule: durable steps need `async def`; a def body's `ctx.step` fails its attempt clearly."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=1))
        def body(ctx: SyncJobContext, input: Item) -> None:
            ctx.step  # noqa: B018 - the refusal is the point

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the run")
            record = await app.get_job(result.job_id)
        assert record.last_error is not None
        assert "XJOBS_STEP_NEEDS_ASYNC" in record.last_error
        assert "async def" in record.last_error

    async def test_a_body_holding_the_cpu_past_its_lease_keeps_it(self, parity: ParityEnv) -> None:
        """Rule: the loop stays free while a def body computes: heartbeats go on, the lease holds."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        def body(ctx: SyncJobContext, input: Item) -> None:
            deadline = time.monotonic() + 3 * LEASE_S
            spins = 0
            while time.monotonic() < deadline:  # pure Python: it holds the GIL in turns
                spins += 1

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            stats = await within(
                app.run_worker(lease=LEASE, until_idle=True), what="the run", timeout_s=10
            )
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt, stats.lease_lost) == ("completed", 1, 0)

    async def test_a_deadline_abandons_the_thread_and_the_body_sees_it_cancelled(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a thread cannot be stopped: the deadline fails the attempt and the body, polling
        `ctx.cancelled`, learns it was given up on."""
        noticed = threading.Event()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=1),
            timeout=timedelta(milliseconds=100),
        )
        def body(ctx: SyncJobContext, input: Item) -> None:
            for _ in range(500):
                if ctx.cancelled:
                    noticed.set()
                    return
                time.sleep(0.01)

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the run")
            record = await app.get_job(result.job_id)
        assert noticed.wait(5)
        assert record.state == "dead"
        assert record.last_error is not None
        assert "XJOBS_TIMEOUT" in record.last_error

    async def test_threads_bound_how_many_def_bodies_run_at_once(self, parity: ParityEnv) -> None:
        """Rule: a worker runs at most `threads` plain bodies at once, whatever its slots."""
        running = 0
        peak = 0
        lock = threading.Lock()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        def body(ctx: SyncJobContext, input: Item) -> None:
            nonlocal running, peak
            with lock:
                running += 1
                peak = max(peak, running)
            time.sleep(0.05)
            with lock:
                running -= 1

        async with parity.app([body]) as app:
            await body.enqueue_many([Item(key=f"k{n}") for n in range(4)])
            stats = await within(
                app.run_worker(lease=LEASE, until_idle=True, concurrency=4, threads=1),
                what="four runs",
            )
        assert (stats.completed, peak) == (4, 1)
