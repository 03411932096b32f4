"""Parity: rate limits as a worker enforces them — deferral, per key, abandon vs release, fairness (semantics.md, "The worker")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from xjobs import App, JobContext, Rate, job
from xjobs.contract.rates import RateBucket, RateStore, RateVerdict
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE, Item, SettledLog, key_of, org_of, within

pytestmark = pytest.mark.xjobs_parity

MINUTE_MS = 60_000
ONE_PER_MINUTE = Rate(limit=1, per=timedelta(minutes=1))


class CountingRates:
    """A rate store that counts the grants that reach it (the local fast path skips some)."""

    def __init__(self, inner: RateStore) -> None:
        self.inner = inner
        self.acquires = 0
        self.reserves = 0

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        self.acquires += 1
        return await self.inner.acquire(buckets)

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        self.acquires += len(grants)
        return await self.inner.acquire_many(grants)

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        self.reserves += 1
        return await self.inner.reserve(buckets, count, hold_ms)

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        await self.inner.abandon(buckets)

    async def spent(self, key: str, interval_ms: float) -> float:
        return await self.inner.spent(key, interval_ms)


class TestRateRefusal:
    async def test_a_declared_rate_without_a_rate_store_refuses_to_start(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a declared `rate` with no rate store makes `start()` raise XJOBS_RATE_UNENFORCEABLE."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, rate=ONE_PER_MINUTE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        without_rates = replace(parity.backend, rates=None)
        app = App(without_rates, jobs=[body], clock=parity.clock)
        async with app:
            worker = app.worker()
            with pytest.raises(XJobsError) as refused:
                await worker.start()
        assert refused.value.code == "XJOBS_RATE_UNENFORCEABLE"


@pytest.mark.requires("rates")
class TestRateDeferral:
    async def test_a_run_over_its_rate_is_deferred_uncounted_to_the_permit_time(
        self, parity: ParityEnv
    ) -> None:
        """Rule: over its rate a run is DEFERRED: `ready`, attempt not spent, no `last_error`, due when a permit is free."""
        log = SettledLog()

        @job(
            tenant=org_of, idempotency_key=key_of, queue=QUEUE, rate=ONE_PER_MINUTE, on_settled=log
        )
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            first = await body.enqueue(Item(key="first"))
            second = await body.enqueue(Item(key="second"))
            start = parity.clock.now_ms()
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the worker to idle"
            )
            ran = await app.get_job(first.job_id)
            deferred = await app.get_job(second.job_id)
            parity.clock.advance(MINUTE_MS)
            later = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the worker to idle again"
            )
            done = await app.get_job(second.job_id)
        assert (stats.completed, stats.deferred) == (1, 1)
        assert ran.state == "completed"
        assert (deferred.state, deferred.attempt, deferred.last_error) == ("ready", 0, None)
        assert deferred.run_at_ms == start + MINUTE_MS
        # a deferral is no ending: `on_settled` hears only the completion
        assert [e.outcome for e in log.for_job(second.job_id)] == ["completed"]
        assert (later.completed, later.deferred, done.state, done.attempt) == (1, 0, "completed", 1)

    async def test_a_keyed_rate_limits_each_key_on_its_own(self, parity: ParityEnv) -> None:
        """Rule: `Rate(key=...)` is a limit per derived key: one run per org, the rest deferred."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            rate=Rate(limit=1, per=timedelta(minutes=1), key=org_of),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            ids = {
                (org, n): (await body.enqueue(Item(org=org, key=f"{org}-{n}"))).job_id
                for org in ("org-1", "org-2")
                for n in range(2)
            }
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the worker to idle"
            )
            states = {k: (await app.get_job(v)).state for k, v in ids.items()}
        assert (stats.completed, stats.deferred) == (2, 2)
        for org in ("org-1", "org-2"):
            assert sorted(states[(org, n)] for n in range(2)) == ["completed", "ready"]

    async def test_a_worker_queue_rate_and_a_job_rate_both_apply(self, parity: ParityEnv) -> None:
        """Rule: several rates may apply to one run (the job's and the worker's per queue): each must have a permit."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            rate=Rate(limit=10, per=timedelta(minutes=1)),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            for n in range(3):
                await body.enqueue(Item(key=f"k-{n}"))
            stats = await within(
                app.run_worker(
                    concurrency=1,
                    until_idle=True,
                    queue_rates={QUEUE: Rate(limit=2, per=timedelta(minutes=1))},
                ),
                what="the worker to idle",
            )
        assert (stats.completed, stats.deferred) == (2, 1)

    async def test_a_hot_key_is_refused_locally_without_a_round_trip(
        self, parity: ParityEnv
    ) -> None:
        """Rule: when this process's own grants already fill a bucket, the run is deferred without asking the store."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, rate=ONE_PER_MINUTE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        rates = parity.backend.rates
        assert rates is not None
        counting = CountingRates(rates)
        app = App(replace(parity.backend, rates=counting), jobs=[body], clock=parity.clock)
        async with app:
            for n in range(4):
                await body.enqueue(Item(key=f"k-{n}"))
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the worker to idle"
            )
        assert (stats.completed, stats.deferred) == (1, 3)
        assert counting.acquires == 1

    async def test_an_unkeyed_rate_far_above_the_load_starts_runs_on_permits_held_ahead(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a job whose limits are all unkeyed reserves an allotment in one store call and starts runs on it; a keyed one is asked per run."""
        far = Rate(limit=1_000_000, per=timedelta(seconds=1))

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, rate=far)
        async def plain(ctx: JobContext, input: Item) -> None:
            return None

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, rate=replace(far, key=org_of))
        async def keyed(ctx: JobContext, input: Item) -> None:
            return None

        rates = parity.backend.rates
        assert rates is not None
        counting = CountingRates(rates)
        app = App(replace(parity.backend, rates=counting), jobs=[plain, keyed], clock=parity.clock)
        async with app:
            for n in range(20):
                await plain.enqueue(Item(key=f"p-{n}"))
            stats = await within(
                app.run_worker(concurrency=4, until_idle=True), what="the worker to idle"
            )
            held = (counting.reserves, counting.acquires)
            for n in range(3):
                await keyed.enqueue(Item(key=f"k-{n}"))
            keyed_stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the worker to idle again"
            )
        assert (stats.completed, stats.deferred) == (20, 0)
        # a first allotment for the 4 runs waiting, then more asked ahead: more only if one lapsed
        assert 1 <= held[0] <= 10
        assert held[1] == 0
        assert keyed_stats.completed == 3
        assert (counting.reserves, counting.acquires) == (held[0], 3)


@pytest.mark.requires("rates")
@pytest.mark.requires("slots")
class TestAbandonVersusRelease:
    async def test_a_shed_run_abandons_its_permit_and_a_started_run_keeps_it(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a permit taken for a run that never started (shed by a busy slot) is abandoned; a started run's stays spent."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=1,
            rate=Rate(limit=2, per=timedelta(hours=1)),
        )
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
            shed = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the second worker to idle"
            )
            release.set()
            await within(holder, what="the first run to finish")
            parity.clock.advance(5_000)  # past the shed's delay, far inside the hour
            second_run = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the third worker to idle"
            )
            third = await body.enqueue(Item(key="third"))
            parity.clock.advance(1)
            third_run = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the fourth worker to idle"
            )
            done, waiting = await app.get_job(second.job_id), await app.get_job(third.job_id)
        assert (shed.shed, shed.deferred) == (1, 0)
        assert (second_run.completed, second_run.deferred, done.state) == (1, 0, "completed")
        assert (third_run.completed, third_run.deferred, waiting.state) == (0, 1, "ready")


@pytest.mark.requires("rates")
class TestFairness:
    async def test_a_flooding_tenant_over_its_rate_does_not_starve_another(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a tenant whose runs are all rate-deferred leaves the queue to the others: theirs all run."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            rate=Rate(limit=2, per=timedelta(hours=1), key=org_of),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            flood = [
                (await body.enqueue(Item(org="flood", key=f"f-{n}"))).job_id for n in range(12)
            ]
            quiet = [(await body.enqueue(Item(org="quiet", key=f"q-{n}"))).job_id for n in range(2)]
            stats = await within(
                app.run_worker(concurrency=2, until_idle=True), what="the worker to idle"
            )
            flooded = [(await app.get_job(i)).state for i in flood]
            served = [(await app.get_job(i)).state for i in quiet]
        assert served == ["completed", "completed"]
        assert sorted(flooded).count("completed") == 2
        assert stats.deferred == 10
        # each deferred run was claimed once: the claim does not spin on it
        assert stats.claimed == 14
