"""Parity: fleet-wide concurrency slots, per job and per key (semantics.md, "The worker": admission)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from xjobs import App, Concurrency, JobContext, job
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    QUEUE,
    Item,
    Overlap,
    SettledLog,
    key_of,
    org_of,
    within,
)

pytestmark = pytest.mark.xjobs_parity

# A shed job comes back after a short delay on the driver's clock; a round moves the clock past it.
SHED_WAIT = timedelta(seconds=5)
SHED_WAIT_MS = int(SHED_WAIT.total_seconds() * 1000)


class TestConcurrencyEnforcement:
    async def test_a_declared_concurrency_without_a_lease_store_refuses_to_start(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a declared `concurrency` with no lease store makes `start()` raise XJOBS_CONCURRENCY_UNENFORCEABLE."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        without_slots = replace(parity.backend, slots=None)
        app = App(without_slots, jobs=[body], clock=parity.clock)
        async with app:
            worker = app.worker()
            with pytest.raises(XJobsError) as refused:
                await worker.start()
        assert refused.value.code == "XJOBS_CONCURRENCY_UNENFORCEABLE"
        assert worker.state == "new"


@pytest.mark.requires("slots")
class TestFleetConcurrency:
    async def test_a_job_limit_of_one_never_runs_two_bodies_across_workers(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `concurrency=1` is a fleet-wide limit: never two runs of the job at once, across workers."""
        overlap = Overlap()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1)
        async def body(ctx: JobContext, input: Item) -> None:
            with overlap.running():
                await asyncio.sleep(0.02)

        app = parity.app(jobs=[body])
        async with app:
            results = await body.enqueue_many([Item(key=f"k-{n}") for n in range(4)])
            shed = 0
            for _ in range(8):
                both = await within(
                    asyncio.gather(
                        app.run_worker(concurrency=2, until_idle=True),
                        app.run_worker(concurrency=2, until_idle=True),
                    ),
                    what="two workers to idle",
                )
                shed += sum(stats.shed for stats in both)
                states = [(await app.get_job(r.job_id)).state for r in results]
                if all(state == "completed" for state in states):
                    break
                parity.clock.advance(SHED_WAIT_MS)
        assert states == ["completed"] * 4
        assert overlap.most == 1
        assert overlap.entered == 4
        assert shed >= 1  # the limit was met, not merely never tested

    async def test_a_shed_job_keeps_its_attempt(self, parity: ParityEnv) -> None:
        """Rule: a busy slot sheds the claimed job: it stays `ready`, `counts_as_attempt=False`, no `last_error`."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            if input.key == "first":
                await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item(key="first"))
            holder = asyncio.create_task(app.run_worker(concurrency=1, until_idle=True))
            await within(started.wait(), what="the first body to start")
            second = await body.enqueue(Item(key="second"))
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the second worker to idle"
            )
            shed = await app.get_job(second.job_id)
            release.set()
            await within(holder, what="the first run to finish")
        assert stats.shed == 1
        assert (shed.state, shed.attempt, shed.claims, shed.last_error) == ("ready", 0, 1, None)

    async def test_when_busy_fail_refuses_a_second_run_of_the_key(self, parity: ParityEnv) -> None:
        """Rule: `when_busy="fail"` on evidence of another holder: nack(fail, uncounted), `failed`, outcome `refused`, the body never runs."""
        started, release = asyncio.Event(), asyncio.Event()
        ran: list[str] = []
        log = SettledLog()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="fail"),
            on_settled=log,
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)
            started.set()
            if input.key == "first":
                await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            first = await body.enqueue(Item(org="org-1", key="first"))
            holder = asyncio.create_task(app.run_worker(concurrency=1, until_idle=True))
            await within(started.wait(), what="the first body to start")
            second = await body.enqueue(Item(org="org-1", key="second"))
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the second worker to idle"
            )
            refused = await app.get_job(second.job_id)
            release.set()
            holder_stats = await within(holder, what="the first run to finish")
            done = await app.get_job(first.job_id)
        assert ran == ["first"]
        assert stats.refused == 1
        assert (refused.state, refused.attempt) == ("failed", 0)
        assert refused.last_error is not None
        assert (done.state, holder_stats.completed) == ("completed", 1)
        assert [e.outcome for e in log.for_job(second.job_id)] == ["refused"]
        assert [e.tenant for e in log.for_job(second.job_id)] == ["org-1"]
        (actor,) = [
            a for e, a in zip(log.events, log.actors, strict=True) if e.job_id == second.job_id
        ]
        assert actor is not None
        assert actor.org_id == "org-1"

    async def test_when_busy_fail_lets_another_key_run(self, parity: ParityEnv) -> None:
        """Rule: the limit is per key: a run of another key is admitted while the first key is held."""
        started, release = asyncio.Event(), asyncio.Event()
        ran: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="fail"),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.org)
            started.set()
            if input.org == "org-1":
                await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item(org="org-1", key="first"))
            holder = asyncio.create_task(app.run_worker(concurrency=1, until_idle=True))
            await within(started.wait(), what="the first body to start")
            other = await body.enqueue(Item(org="org-2", key="other"))
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the second worker to idle"
            )
            record = await app.get_job(other.job_id)
            release.set()
            await within(holder, what="the first run to finish")
        assert ran == ["org-1", "org-2"]
        assert (stats.completed, stats.refused) == (1, 0)
        assert record.state == "completed"

    async def test_when_busy_wait_sheds_and_runs_after_the_holder_finishes(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `when_busy="wait"` sheds (stays `ready`, attempt not counted); it runs once the key is free."""
        started, release = asyncio.Event(), asyncio.Event()
        ran: list[str] = []
        log = SettledLog()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="wait"),
            on_settled=log,
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)
            started.set()
            if input.key == "first":
                await release.wait()

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item(org="org-1", key="first"))
            holder = asyncio.create_task(app.run_worker(concurrency=1, until_idle=True))
            await within(started.wait(), what="the first body to start")
            second = await body.enqueue(Item(org="org-1", key="second"))
            waiting = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the second worker to idle"
            )
            shed = await app.get_job(second.job_id)
            release.set()
            await within(holder, what="the first run to finish")
            parity.clock.advance(SHED_WAIT_MS)
            later = await within(app.run_worker(until_idle=True), what="the shed job to run")
            done = await app.get_job(second.job_id)
        assert (waiting.shed, waiting.refused) == (1, 0)
        assert (shed.state, shed.attempt, shed.last_error) == ("ready", 0, None)
        assert later.completed == 1
        assert ran == ["first", "second"]
        assert (done.state, done.attempt) == ("completed", 1)
        assert [e.outcome for e in log.for_job(second.job_id)] == ["completed"]  # never for a shed

    async def test_a_released_slot_admits_the_next_run_at_once(self, parity: ParityEnv) -> None:
        """Rule: a fleet slot is released (awaited) when its run settles: the next run of the key is admitted."""
        ran: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="fail"),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item(org="org-1", key="first"))
            first = await within(app.run_worker(concurrency=1, until_idle=True), what="run one")
            await body.enqueue(Item(org="org-1", key="second"))
            second = await within(app.run_worker(concurrency=1, until_idle=True), what="run two")
        assert ran == ["first", "second"]
        assert (first.completed, second.completed, second.refused) == (1, 1, 0)

    async def test_a_slot_that_cannot_be_renewed_for_a_whole_ttl_cancels_the_run_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a fleet slot is HELD, not owned: renewals failing for a whole TTL cancel the run
        with XJOBS_SLOT_LOST, and the job is retried without spending the attempt."""
        seen: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1)
        async def body(ctx: JobContext, input: Item) -> None:
            if seen:
                return  # the store came back: the retry completes
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        slots = parity.slots
        real_renew = slots.renew

        async def unreachable_until_lost(*args: object, **kwargs: object) -> bool:
            if not seen:
                raise ConnectionError("the slot store did not answer the renewal")
            return await real_renew(*args, **kwargs)  # type: ignore[arg-type]

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            slots.renew = unreachable_until_lost  # type: ignore[method-assign]
            try:
                stats = await within(
                    app.run_worker(lease=LEASE, until_idle=True), what="the slot to be lost"
                )
            finally:
                slots.renew = real_renew  # type: ignore[method-assign]
            record = await app.get_job(result.job_id)
        assert seen == ["cancelled"]
        assert (record.state, record.attempt) == ("completed", 1)
        assert record.last_error is not None
        assert "XJOBS_SLOT_LOST" in record.last_error
        assert (stats.retried, stats.completed) == (1, 1)
