"""Parity: retention through the App — the purge job a worker runs, the pass by hand, and idempotency after a purge (semantics.md, "Factories": `purge()`)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from xjobs import JobContext, job
from xjobs.contract.retention import PURGE_STORES, Retention
from xjobs.factories.purge import CLOCK_STEP, PURGE_JOB
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, Item, key_of, org_of

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("retention")]

HOUR_MS = 3_600_000
POLICY = Retention(completed=timedelta(hours=1), failed=timedelta(hours=1), queue=QUEUE)


def _declare() -> object:
    @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
    async def charge(ctx: JobContext, input: Item) -> str:
        return await ctx.step.run("charge", lambda: f"charged {input.key}")

    return charge


class TestThePurgeJob:
    async def test_the_app_registers_the_purge_job_and_its_cron_task(
        self, parity: ParityEnv
    ) -> None:
        """Rule: retention on registers `xjobs.purge` and the task the scheduler's leader fires."""
        app = parity.app([_declare()], retention=POLICY)
        assert PURGE_JOB in app.jobs
        assert PURGE_JOB in app.registry.tasks
        assert app.registry.tasks[PURGE_JOB].cron == POLICY.cron
        assert app.jobs[PURGE_JOB].queue == QUEUE
        assert PURGE_JOB not in parity.app([_declare()]).jobs

    @pytest.mark.requires("steps")
    async def test_a_worker_runs_a_pass_one_step_a_store_at_one_clock_reading(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the pass reads the clock once (a step), then purges each store in a step named
        after it, and removes the finished jobs past their keep."""
        charge = _declare()
        async with parity.app([charge], retention=POLICY) as app:
            done = await app.enqueue(app.jobs["charge"], Item(key="old"))
            await app.run_worker(lease=LEASE, until_idle=True)
            assert (await app.get_job(done.job_id)).state == "completed"
            parity.clock.advance(2 * HOUR_MS)
            live = await app.enqueue(app.jobs["charge"], Item(key="live"), delay=timedelta(days=1))
            passed = await app.enqueue(app.jobs[PURGE_JOB], {})
            await app.run_worker(lease=LEASE, until_idle=True)
            steps = await app.get_steps(passed.job_id)
            assert [s.name for s in steps] == [CLOCK_STEP, *PURGE_STORES]
            assert json.loads(steps[0].result or "null") == parity.clock.now_ms()
            report = {s.name: json.loads(s.result or "null") for s in steps[1:]}
            assert report["jobs"] == 1
            assert await app.backend.jobs.get(done.job_id) is None
            assert (await app.get_job(live.job_id)).state == "ready"

    async def test_a_pass_by_hand_and_its_dry_run(self, parity: ParityEnv) -> None:
        """Rule: `app.purge()` runs one pass here and now; with `dry_run` it counts and deletes nothing."""
        charge = _declare()
        async with parity.app([charge], retention=POLICY) as app:
            first = await app.enqueue(app.jobs["charge"], Item(key="a"))
            await app.run_worker(lease=LEASE, until_idle=True)
            parity.clock.advance(2 * HOUR_MS)
            dry = await app.purge(dry_run=True)
            assert set(dry) == set(PURGE_STORES)
            assert dry["jobs"] == 1
            assert await app.backend.jobs.get(first.job_id) is not None
            assert (await app.purge())["jobs"] == 1
            assert (await app.purge(dry_run=True))["jobs"] == 0

    @pytest.mark.requires("events")
    async def test_a_pass_purges_every_store_the_events_included(self, parity: ParityEnv) -> None:
        """Rule: `purge()` calls every store's purge, the event bus's too: an event sent before
        its keep goes (the bus finds it no more) and one sent after stays; the report names
        every store."""
        policy = Retention(events=timedelta(hours=1), queue=QUEUE)
        async with parity.app([_declare()], retention=policy) as app:
            bus = app.backend.events
            assert bus is not None
            await app.send_event("order.paid", {"order": 1})
            parity.clock.advance(2 * HOUR_MS)
            later = await app.send_event("order.paid", {"order": 2})
            assert (await app.purge(dry_run=True))["events"] == 1
            report = await app.purge()
            assert set(report) == set(PURGE_STORES)
            assert report["events"] == 1
            assert await bus.find("order.paid", '{"order": 1}', 0) is None
            kept = await bus.find("order.paid", "{}", 0)
            assert kept is not None
            assert kept.id == later.id
            assert (await app.purge())["events"] == 0

    async def test_a_job_declared_with_its_own_retention_is_kept_that_long(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `@job(retention=...)` replaces the app's keep for that job name."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retention=timedelta(hours=5))
        async def audit(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([_declare(), audit], retention=POLICY) as app:
            kept = await app.enqueue(audit, Item(key="audit"))
            gone = await app.enqueue(app.jobs["charge"], Item(key="charge"))
            await app.run_worker(lease=LEASE, until_idle=True)
            parity.clock.advance(2 * HOUR_MS)
            assert (await app.purge())["jobs"] == 1
            assert await app.backend.jobs.get(gone.job_id) is None
            assert (await app.get_job(kept.job_id)).state == "completed"
            parity.clock.advance(4 * HOUR_MS)
            assert (await app.purge())["jobs"] == 1


class TestIdempotencyAfterPurge:
    async def test_a_live_job_is_never_purged_and_keeps_its_key(self, parity: ParityEnv) -> None:
        """Rule: the namespace is live rows; a live job outlives any keep and still dedupes."""
        charge = _declare()
        async with parity.app([charge], retention=POLICY) as app:
            first = await app.enqueue(app.jobs["charge"], Item(key="k"), delay=timedelta(days=30))
            parity.clock.advance(100 * 24 * HOUR_MS)
            await app.purge()
            again = await app.enqueue(app.jobs["charge"], Item(key="k"))
            assert again.deduped
            assert again.job_id == first.job_id

    async def test_a_repeated_enqueue_after_the_purge_is_a_new_job_as_before_it(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a finished job never dedupes its key, purged or not: a repeat is a new job."""
        charge = _declare()
        async with parity.app([charge], retention=POLICY) as app:
            first = await app.enqueue(app.jobs["charge"], Item(key="k"))
            await app.run_worker(lease=LEASE, until_idle=True)
            before = await app.enqueue(app.jobs["charge"], Item(key="k"))
            assert not before.deduped
            assert before.job_id != first.job_id
            await app.run_worker(lease=LEASE, until_idle=True)
            parity.clock.advance(2 * HOUR_MS)
            assert (await app.purge())["jobs"] == 2
            after = await app.enqueue(app.jobs["charge"], Item(key="k"))
            assert not after.deduped
            assert after.job_id not in (first.job_id, before.job_id)
            await app.run_worker(lease=LEASE, until_idle=True)
            assert (await app.get_job(after.job_id)).state == "completed"
