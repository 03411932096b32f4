"""Parity: the worker's claim loop, its slots, and the job lease it holds (semantics.md, "The worker")."""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import timedelta

import pytest

from xjobs import App, JobContext, Retry, WorkerStats, job
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    QUEUE,
    Item,
    Overlap,
    SettledLog,
    counting_app,
    eventually,
    key_of,
    org_of,
    reclaim_lapsed,
    within,
)

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = int(LEASE.total_seconds() * 1000)


class TestWorkerLoop:
    async def test_until_idle_returns_the_stats_once_nothing_is_claimable(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `run_worker(until_idle=True)` returns its WorkerStats once nothing is claimable."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue_many([Item(key=f"k-{n}") for n in range(3)])
            later = await body.enqueue(Item(key="later"), delay=timedelta(minutes=5))
            stats = await within(app.run_worker(until_idle=True), what="an idle worker")
            delayed = await app.get_job(later.job_id)
        assert isinstance(stats, WorkerStats)
        assert (stats.claimed, stats.completed) == (3, 3)
        assert (delayed.state, delayed.attempt) == ("ready", 0)

    async def test_until_idle_on_an_empty_queue_returns_at_once(self, parity: ParityEnv) -> None:
        """Rule: an idle pass that claims nothing, with nothing running, ends an until_idle worker."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            stats = await within(app.run_worker(until_idle=True), what="an idle worker")
        assert stats.as_dict() == WorkerStats().as_dict()

    async def test_each_queue_runs_at_most_its_own_concurrency(self, parity: ParityEnv) -> None:
        """Rule: `Worker(concurrency=...)` reads each option by its own key (slots per queue)."""
        gate = asyncio.Event()
        overlap = {"q-a": Overlap(), "q-b": Overlap()}

        @job(tenant=org_of, idempotency_key=key_of, queue="q-a")
        async def in_a(ctx: JobContext, input: Item) -> None:
            with overlap["q-a"].running():
                await gate.wait()

        @job(tenant=org_of, idempotency_key=key_of, queue="q-b")
        async def in_b(ctx: JobContext, input: Item) -> None:
            with overlap["q-b"].running():
                await gate.wait()

        app = parity.app(jobs=[in_a, in_b])
        async with app:
            await in_a.enqueue_many([Item(key=f"a-{n}") for n in range(5)])
            await in_b.enqueue_many([Item(key=f"b-{n}") for n in range(5)])
            worker = asyncio.create_task(
                app.run_worker(
                    queues=["q-a", "q-b"], concurrency={"q-a": 2, "q-b": 1}, until_idle=True
                )
            )
            await eventually(
                lambda: overlap["q-a"].now == 2 and overlap["q-b"].now == 1,
                what="every slot to be busy",
            )
            await asyncio.sleep(0.05)  # room for a worker that over-claims to show it
            gate.set()
            stats = await within(worker, what="the worker to drain both queues")
        assert (overlap["q-a"].most, overlap["q-b"].most) == (2, 1)
        assert stats.completed == 10

    async def test_max_in_flight_caps_the_process_across_queues(self, parity: ParityEnv) -> None:
        """Rule: `max_in_flight` caps the process across queues and is checked before the claim."""
        gate = asyncio.Event()
        overlap = Overlap()

        @job(tenant=org_of, idempotency_key=key_of, queue="q-a")
        async def in_a(ctx: JobContext, input: Item) -> None:
            with overlap.running():
                await gate.wait()

        @job(tenant=org_of, idempotency_key=key_of, queue="q-b")
        async def in_b(ctx: JobContext, input: Item) -> None:
            with overlap.running():
                await gate.wait()

        app = parity.app(jobs=[in_a, in_b])
        async with app:
            await in_a.enqueue_many([Item(key=f"a-{n}") for n in range(4)])
            await in_b.enqueue_many([Item(key=f"b-{n}") for n in range(4)])
            worker = asyncio.create_task(
                app.run_worker(
                    queues=["q-a", "q-b"], concurrency=5, max_in_flight=2, until_idle=True
                )
            )
            await eventually(lambda: overlap.now == 2, what="two jobs to run")
            await asyncio.sleep(0.05)  # room for a worker that over-claims to show it
            in_flight_at_cap = overlap.now
            gate.set()
            stats = await within(worker, what="the worker to drain both queues")
        assert in_flight_at_cap == 2
        assert overlap.most == 2
        assert stats.completed == stats.claimed

    async def test_an_idle_pass_asks_every_queue_with_a_free_slot_under_max_in_flight(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an idle pass is ONE claim over every queue with a free slot (`max_in_flight` caps the total, it hides no queue)."""

        @job(tenant=org_of, idempotency_key=key_of, queue="q-a")
        async def in_a(ctx: JobContext, input: Item) -> None:
            return None

        @job(tenant=org_of, idempotency_key=key_of, queue="q-b")
        async def in_b(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[in_a, in_b])
        async with app:
            waiting = await in_b.enqueue_many([Item(key=f"b-{n}") for n in range(3)])
            stats = await within(
                app.run_worker(
                    queues=["q-a", "q-b"], concurrency=5, max_in_flight=2, until_idle=True
                ),
                what="an idle worker",
            )
            states = [(await app.get_job(r.job_id)).state for r in waiting]
        assert states == ["completed"] * 3
        assert stats.completed == 3

    async def test_zero_concurrency_for_a_queue_is_a_hard_stop(self, parity: ParityEnv) -> None:
        """Rule: a concurrency of zero is a hard stop, never "unlimited"."""
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue="q-a")
        async def in_a(ctx: JobContext, input: Item) -> None:
            ran.append("a")

        @job(tenant=org_of, idempotency_key=key_of, queue="q-b")
        async def in_b(ctx: JobContext, input: Item) -> None:
            ran.append("b")

        app = parity.app(jobs=[in_a, in_b])
        async with app:
            stopped = await in_a.enqueue(Item())
            await in_b.enqueue(Item())
            stats = await within(
                app.run_worker(
                    queues=["q-a", "q-b"], concurrency={"q-a": 0, "q-b": 3}, until_idle=True
                ),
                what="an idle worker",
            )
            record = await app.get_job(stopped.job_id)
        assert ran == ["b"]
        assert stats.completed == 1
        assert (record.state, record.attempt) == ("ready", 0)

    async def test_until_idle_with_no_slot_at_all_returns_at_once(self, parity: ParityEnv) -> None:
        """Rule: a concurrency of zero is a hard stop, and an until_idle worker that can claim nothing is idle."""
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await within(
                app.run_worker(concurrency=0, until_idle=True),
                what="a worker with no slot to idle",
                timeout_s=1.0,
            )
            record = await app.get_job(result.job_id)
        assert ran == []
        assert stats.claimed == 0
        assert (record.state, record.attempt) == ("ready", 0)

    async def test_an_unknown_job_name_fails_the_attempt(self, parity: ParityEnv) -> None:
        """Rule: a row naming a job this worker does not know is a counted failed attempt, never silently dropped."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=2, base=timedelta(0), cap=timedelta(0)),
        )
        async def retired(ctx: JobContext, input: Item) -> None:
            return None

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def current(ctx: JobContext, input: Item) -> None:
            return None

        old_deploy = parity.app(jobs=[retired])
        async with old_deploy:
            result = await retired.enqueue(Item())
        new_deploy = parity.app(jobs=[current])
        async with new_deploy:
            first = await within(new_deploy.run_worker(until_idle=True), what="an idle worker")
            after_first = await new_deploy.get_job(result.job_id)
            parity.clock.advance(60_000)
            second = await within(new_deploy.run_worker(until_idle=True), what="an idle worker")
            after_second = await new_deploy.get_job(result.job_id)
        assert (after_first.state, after_first.attempt) == ("ready", 1)
        assert after_first.last_error is not None
        assert "XJOBS_JOB_NOT_REGISTERED" in after_first.last_error
        assert first.retried == 1
        assert (after_second.state, after_second.attempt) == ("dead", 2)
        assert second.dead_lettered == 1

    async def test_a_worker_starts_once(self, parity: ParityEnv) -> None:
        """Rule: a second `start()` is refused with XJOBS_WORKER_STATE (also after the worker stopped)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            worker = app.worker()
            await worker.start()
            try:
                with pytest.raises(XJobsError) as running:
                    await worker.start()
            finally:
                await worker.stop()
            with pytest.raises(XJobsError) as stopped:
                await worker.start()
        assert running.value.code == "XJOBS_WORKER_STATE"
        assert stopped.value.code == "XJOBS_WORKER_STATE"

    @pytest.mark.requires("workers")
    async def test_the_registry_row_lives_while_the_worker_runs(self, parity: ParityEnv) -> None:
        """Rule: a worker's registry row (id, host, pid, queues, started, last seen) exists while it runs; `stop()` removes it."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        registry = parity.backend.workers
        assert registry is not None
        app = parity.app(jobs=[body])
        async with app:
            worker = app.worker(queues=[QUEUE])
            started_at = parity.clock.now_ms()
            await worker.start()
            try:
                rows = {row.id: row for row in await registry.list()}
            finally:
                await worker.stop()
            after = [row.id for row in await registry.list()]
        assert worker.id in rows
        row = rows[worker.id]
        assert (row.queues, row.pid) == ((QUEUE,), os.getpid())
        assert row.started_at_ms == started_at
        assert row.last_seen_ms >= started_at
        assert row.host
        assert worker.id not in after

    async def test_each_worker_has_its_own_random_id(self, parity: ParityEnv) -> None:
        """Rule: each worker process has its own random id (a UUID), never a host or pod name alone."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            ids = {app.worker().id for _ in range(3)}
        assert len(ids) == 3
        for worker_id in ids:
            uuid.UUID(worker_id)

    async def test_a_freed_slot_kicks_the_next_pass(self, parity: ParityEnv) -> None:
        """Rule: a freed slot kicks one pass: a full worker does not wait out its idle timer to take the next job."""
        done: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            done.append(input.key)

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue_many([Item(key=f"k-{n}") for n in range(3)])
            worker = app.worker(concurrency=1)
            await worker.start()
            try:
                await eventually(lambda: len(done) == 3, what="three jobs, one slot", timeout_s=1.0)
            finally:
                await worker.stop()
        assert sorted(done) == ["k-0", "k-1", "k-2"]
        assert worker.stats.completed == 3


class TestHeartbeat:
    async def test_a_heartbeat_extends_the_lease_from_the_driver_clock(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the job lease is renewed while the body runs (a heartbeat every third of the lease)."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            first = (await app.get_job(result.job_id)).lease_until_ms
            moved_to = parity.clock.advance(LEASE_MS // 2)
            renewed: list[int | None] = []

            async def renewed_lease() -> None:
                while True:
                    lease_until = (await app.get_job(result.job_id)).lease_until_ms
                    if lease_until is not None and lease_until >= moved_to + LEASE_MS:
                        renewed.append(lease_until)
                        return
                    await asyncio.sleep(0.01)

            await within(renewed_lease(), what="a heartbeat to land")
            release.set()
            stats = await within(worker, what="the run to settle")
            record = await app.get_job(result.job_id)
        assert first is not None
        assert renewed[0] is not None
        assert renewed[0] > first
        assert (record.state, stats.completed, stats.lease_lost) == ("completed", 1, 0)

    async def test_cancelling_a_running_job_cancels_its_body(self, parity: ParityEnv) -> None:
        """Rule: a cancelled running job's worker sees its next heartbeat miss and cancels the run."""
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
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            await app.cancel_job(result.job_id, "operator said so")
            stats = await within(worker, what="the heartbeat to miss and the run to end")
            record = await app.get_job(result.job_id)
        assert seen == ["cancelled"]
        assert record.state == "cancelled"
        assert (stats.cancelled, stats.completed, stats.lease_lost) == (1, 0, 0)
        assert log.events == []  # never for a cancel

    async def test_a_lost_lease_cancels_the_body_and_leaves_the_new_holder_alone(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the job lease is held, not owned: once the claim moved on, the heartbeat misses and the run is cancelled."""
        started = asyncio.Event()
        seen: list[str] = []
        log = SettledLog()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=3, base=timedelta(0), cap=timedelta(0)),
        )
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
            # One slot: while its run is in flight this worker cannot claim the lapsed job itself.
            worker = asyncio.create_task(
                app.run_worker(lease=LEASE, until_idle=True, concurrency=1)
            )
            await within(started.wait(), what="the body to start")
            taken = await reclaim_lapsed(parity, QUEUE, lease_ms=LEASE_MS)
            stats = await within(worker, what="the heartbeat to miss and the run to end")
            record = await app.get_job(result.job_id)
            acked = await parity.backend.jobs.ack(taken.claim)
        assert seen == ["cancelled"]
        assert (stats.lease_lost, stats.completed, stats.retried) == (1, 0, 0)
        assert (record.state, record.claimed_by, record.claims, record.attempt) == (
            "running",
            "worker-b",
            taken.claims,
            2,
        )
        assert record.last_error is None
        assert acked is True  # the new holder's claim is intact
        assert log.events == []

    async def test_a_late_settle_does_not_overwrite_the_new_holder(self, parity: ParityEnv) -> None:
        """Rule: ack/nack are fenced on the claim: a run that finishes after its claim moved on writes nothing."""
        started, release = asyncio.Event(), asyncio.Event()
        log = SettledLog()
        lease = timedelta(
            seconds=30
        )  # no heartbeat fires during the scenario: only the settle can notice

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=3))
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()
            await ctx.progress(0.9)

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            result = await body.enqueue(Item())
            # One slot: while its run is in flight this worker cannot claim the lapsed job itself.
            worker = asyncio.create_task(
                app.run_worker(lease=lease, until_idle=True, concurrency=1)
            )
            await within(started.wait(), what="the body to start")
            taken = await reclaim_lapsed(parity, QUEUE, lease_ms=30_000)
            release.set()
            stats = await within(worker, what="the late settle")
            record = await app.get_job(result.job_id)
        assert (stats.lease_lost, stats.completed) == (1, 0)
        assert (record.state, record.claimed_by, record.claims) == (
            "running",
            "worker-b",
            taken.claims,
        )
        assert (record.finished_at_ms, record.progress) == (None, None)
        assert log.events == []

    async def test_one_failed_heartbeat_only_warns(self, parity: ParityEnv) -> None:
        """Rule: the job lease is held, not owned: one failed heartbeat warns, the run goes on."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()

        app, driver = counting_app(parity, [body])
        async with app:
            result = await body.enqueue(Item())
            driver.failing_heartbeats = 1
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            await eventually(
                lambda: driver.heartbeats[:2] == [None, True],
                what="a failed heartbeat, then one that lands",
            )
            release.set()
            stats = await within(worker, what="the run to settle")
            record = await app.get_job(result.job_id)
        assert (record.state, stats.completed, stats.lease_lost) == ("completed", 1, 0)

    async def test_a_whole_window_without_a_heartbeat_cancels_the_run(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a whole lease window without a heartbeat landing is `jobs.lease.lost` and cancels the run."""
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

        app, driver = counting_app(parity, [body], on_settled=log)
        async with app:
            result = await body.enqueue(Item())
            driver.failing_heartbeats = 1_000
            worker = asyncio.create_task(app.run_worker(lease=LEASE, until_idle=True))
            await within(started.wait(), what="the body to start")
            stats = await within(worker, what="the lease window to pass")
            record = await app.get_job(result.job_id)
        assert seen == ["cancelled"]
        assert (stats.lease_lost, stats.completed, stats.retried) == (1, 0, 0)
        assert (
            record.state == "running"
        )  # the lost run writes nothing; the lapsed lease is reclaimed
        assert log.events == []


class TestSettleThroughFaults:
    async def test_a_settle_the_store_could_not_take_is_retried_while_the_lease_holds(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a failed settle is held and retried with backoff while the lease holds; the job
        completes once and its body never runs again."""
        runs: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            runs.append(ctx.attempt)

        app, driver = counting_app(parity, [body])
        async with app:
            result = await body.enqueue(Item())
            driver.failing_acks = 2
            stats = await within(
                app.run_worker(lease=LEASE, until_idle=True), what="the settle to land"
            )
            record = await app.get_job(result.job_id)
        assert driver.settles == ["raised", "raised", "ack"]
        assert (record.state, runs, stats.completed) == ("completed", [1], 1)

    async def test_a_failed_retry_settle_is_retried_too(self, parity: ParityEnv) -> None:
        """Rule: a nack is held and retried like an ack; the attempt is charged once."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=3))
        async def body(ctx: JobContext, input: Item) -> None:
            raise RuntimeError("boom")

        app, driver = counting_app(parity, [body])
        async with app:
            result = await body.enqueue(Item())
            driver.failing_nacks = 1
            worker = app.worker(lease=LEASE)
            await worker.start()
            await eventually(lambda: driver.settles == ["raised", "nack"], what="the nack")
            await worker.stop()
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("ready", 1)

    @pytest.mark.requires("slots")
    async def test_an_admission_the_slot_store_could_not_answer_hands_the_job_back_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a slot store error before the run started hands the job back (`ready`, the
        attempt not charged) instead of stranding it in `running` until its lease lapses."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1)
        async def body(ctx: JobContext, input: Item) -> None:
            raise AssertionError("the body must not run without its slot")

        slots = parity.slots
        real_acquire = slots.acquire

        async def unreachable(*args: object, **kwargs: object) -> bool:
            raise ConnectionError("the slot store did not answer")

        app = App(parity.backend, jobs=[body], clock=parity.clock)
        async with app:
            result = await body.enqueue(Item())
            slots.acquire = unreachable  # type: ignore[method-assign]
            try:
                worker = app.worker(lease=LEASE)
                await worker.start()
                await eventually(
                    lambda: worker.stats.handed_back >= 1, what="the claim to be handed back"
                )
                await worker.stop()
            finally:
                slots.acquire = real_acquire  # type: ignore[method-assign]
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("ready", 0)
