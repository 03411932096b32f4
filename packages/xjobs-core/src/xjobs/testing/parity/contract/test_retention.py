"""Parity: every store's purge at the store level — what goes, what stays, batches and the dry run (retention.py, "RetentionStore")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xjobs.contract.retention import PurgeCut, PurgeStore, Retention, RetentionStore
from xjobs.contract.stores import WorkerInfo
from xjobs.run.settle import ending, parking, retrying
from xjobs.testing import rows
from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("retention")]

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# Short keeps, so a scenario moves its manual clock by hours, not weeks.
POLICY = Retention(
    completed=timedelta(hours=1),
    cancelled=timedelta(hours=1),
    failed=timedelta(hours=2),
    dead=timedelta(hours=2),
    events=timedelta(hours=1),
    outbox=timedelta(hours=1),
    workers=timedelta(hours=1),
    counters_minute=timedelta(hours=2),
    counters_hour=timedelta(days=2),
    counters_day=timedelta(days=3),
)


def _store(parity: ParityEnv) -> RetentionStore:
    store = parity.backend.retention
    assert store is not None, 'mark the scenario @pytest.mark.requires("retention")'
    return store


def _cut(parity: ParityEnv, per_job: dict[str, int] | None = None) -> PurgeCut:
    return POLICY.cut(parity.clock.now_ms(), per_job)


async def _drain(parity: ParityEnv, store: PurgeStore, cut: PurgeCut, batch: int = 100) -> int:
    """Purge `store` at `cut` in batches until a short one; answers the total."""
    total = 0
    while True:
        gone = await _store(parity).purge(store, cut, batch)
        total += gone
        if gone < batch:
            return total


class TestJobs:
    async def test_a_finished_job_past_its_keep_goes_and_every_other_job_stays(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a job finished before its state's cut goes; a live job, however old, and a job
        finished after the cut stay."""
        old_done = await parity.job_in_state("completed", idempotency_key="old-done")
        old_dead = await parity.job_in_state("dead", idempotency_key="old-dead")
        old_cancelled = await parity.job_in_state("cancelled", idempotency_key="old-cancelled")
        live_ready = await parity.job_in_state("ready", idempotency_key="live-ready")
        parity.clock.advance(90 * 60_000)  # 1.5 h: past completed and cancelled, not failed/dead
        young = await parity.job_in_state("completed", idempotency_key="young", queue="other")
        cut = _cut(parity)
        assert await _store(parity).expired("jobs", cut) == 2
        assert await _drain(parity, "jobs", cut) == 2
        assert await parity.backend.jobs.get(old_done.id) is None
        assert await parity.backend.jobs.get(old_cancelled.id) is None
        for kept in (old_dead, live_ready, young):
            assert await parity.backend.jobs.get(kept.id) is not None
        parity.clock.advance(HOUR_MS)  # 2.5 h: the dead job's keep passed too
        assert await _drain(parity, "jobs", _cut(parity)) == 1
        assert await parity.backend.jobs.get(old_dead.id) is None
        assert (await parity.record(live_ready.id)).state == "ready"
        assert await _store(parity).expired("jobs", _cut(parity)) == 0

    async def test_a_job_name_with_its_own_keep_is_cut_by_it_in_every_state(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a job name's own keep replaces its state's, longer or shorter."""
        kept_long = await parity.job_in_state("completed", name="kept_long", idempotency_key="a")
        kept_short = await parity.job_in_state("dead", name="kept_short", idempotency_key="b")
        plain = await parity.job_in_state("completed", idempotency_key="c")
        parity.clock.advance(90 * 60_000)
        per_job = {"kept_long": 3 * HOUR_MS, "kept_short": 30 * 60_000}
        assert await _drain(parity, "jobs", _cut(parity, per_job)) == 2
        assert await parity.backend.jobs.get(kept_long.id) is not None
        assert await parity.backend.jobs.get(kept_short.id) is None
        assert await parity.backend.jobs.get(plain.id) is None

    @pytest.mark.requires("steps")
    async def test_a_purged_job_takes_its_steps_and_attempt_errors_along(
        self, parity: ParityEnv
    ) -> None:
        """Rule: steps and attempt errors go with their job (never before it)."""
        job = await parity.enqueue(idempotency_key="with-history")
        steps = parity.backend.steps
        assert steps is not None
        claimed = await parity.claim_one()
        assert await steps.put(claimed.claim, rows.step_record(claimed, "charge"))
        assert await parity.backend.jobs.nack(claimed.claim, retrying("first try failed"))
        claimed = await parity.claim_one()
        assert await parity.backend.jobs.nack(claimed.claim, ending(True, "dead for good"))
        ops = parity.introspection
        assert len(await ops.errors(job.id)) == 2
        assert len(await steps.list(job.run_id, job.queue)) == 1
        parity.clock.advance(HOUR_MS)  # the dead keep is 2 h: nothing goes yet
        assert await _drain(parity, "jobs", _cut(parity)) == 0
        assert len(await steps.list(job.run_id, job.queue)) == 1
        parity.clock.advance(2 * HOUR_MS)
        assert await _drain(parity, "jobs", _cut(parity)) == 1
        assert await parity.backend.jobs.get(job.id) is None
        assert await steps.list(job.run_id, job.queue) == []
        assert await ops.errors(job.id) == []

    async def test_a_batch_removes_at_most_its_limit_and_a_short_batch_means_done(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a purge batch deletes at most `limit` rows; fewer than `limit` means none is left."""
        for n in range(5):
            await parity.job_in_state("completed", idempotency_key=f"k{n}")
        parity.clock.advance(2 * HOUR_MS)
        cut = _cut(parity)
        store = _store(parity)
        assert [await store.purge("jobs", cut, 2) for _ in range(4)] == [2, 2, 1, 0]

    async def test_the_dry_run_deletes_nothing(self, parity: ParityEnv) -> None:
        """Rule: `expired` counts what a purge would delete and deletes nothing."""
        job = await parity.job_in_state("completed", idempotency_key="counted")
        parity.clock.advance(2 * HOUR_MS)
        cut = _cut(parity)
        assert await _store(parity).expired("jobs", cut) == 1
        assert await _store(parity).expired("jobs", cut) == 1
        assert await parity.backend.jobs.get(job.id) is not None


class TestEvents:
    @pytest.mark.requires("events")
    async def test_an_event_sent_before_the_cut_goes_and_a_later_one_stays(
        self, parity: ParityEnv
    ) -> None:
        """Rule: events go by their send instant; a later event is still found."""
        bus = parity.backend.events
        assert bus is not None
        await bus.send("order.paid", '{"order": 1}')
        parity.clock.advance(2 * HOUR_MS)
        later = await bus.send("order.paid", '{"order": 2}')
        cut = _cut(parity)
        assert await _store(parity).expired("events", cut) == 1
        assert await _drain(parity, "events", cut) == 1
        assert await bus.find("order.paid", '{"order": 1}', 0) is None
        assert await bus.find("order.paid", "{}", 0) == later

    @pytest.mark.requires("events")
    async def test_a_wait_whose_deadline_passed_before_the_cut_goes(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a wait whose deadline lapsed before the cut goes; its job is left as it is."""
        bus = parity.backend.events
        assert bus is not None
        job = await parity.enqueue(idempotency_key="waits")
        claimed = await parity.claim_one()
        now = parity.clock.now_ms()
        wait = rows.event_wait(claimed, since_ms=now, deadline_ms=now + 60_000)
        assert await bus.park(claimed.claim, wait, parking(now + 60_000))
        parity.clock.advance(3 * HOUR_MS)
        assert await _drain(parity, "events", _cut(parity)) == 1
        assert (await parity.record(job.id)).state == "waiting"


class TestOutboxWorkersCounters:
    @pytest.mark.requires("outbox")
    async def test_the_outbox_purge_leaves_every_unpublished_row(self, parity: ParityEnv) -> None:
        """Rule: only published rows go; a staged row waits for its relay however old."""
        outbox = parity.backend.outbox
        assert outbox is not None
        published, staged = parity.new_job(idempotency_key="p"), parity.new_job(idempotency_key="s")
        await outbox.stage([published])
        assert [r.id for r in await outbox.claim("relay-a", 1, 30_000)] == [published.id]
        assert await outbox.mark_published("relay-a", [published.id]) == 1
        await outbox.stage([staged])
        parity.clock.advance(3 * HOUR_MS)
        await _drain(parity, "outbox", _cut(parity))
        assert await _store(parity).expired("outbox", _cut(parity)) == 0
        assert await outbox.pending() == 1
        assert [r.id for r in await outbox.claim("relay-a", 10, 30_000)] == [staged.id]

    @pytest.mark.requires("workers")
    async def test_a_worker_row_expired_before_the_cut_goes(self, parity: ParityEnv) -> None:
        """Rule: a worker row goes once it expired longer ago than the keep; a live one stays."""
        now = parity.clock.now_ms()
        gone = WorkerInfo("worker-gone", "host", 1, ("parity",), now, now)
        await parity.workers.announce(gone, 60_000)
        parity.clock.advance(2 * HOUR_MS)
        live = WorkerInfo("worker-live", "host", 2, ("parity",), now, now)
        await parity.workers.announce(live, 60_000)
        cut = _cut(parity)
        assert await _store(parity).expired("workers", cut) <= 1
        await _drain(parity, "workers", cut)
        assert await _store(parity).expired("workers", cut) == 0
        assert [w.id for w in await parity.workers.list()] == ["worker-live"]

    @pytest.mark.requires("introspection")
    async def test_counters_survive_the_purge_of_the_rows_they_counted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a folded minute bucket goes at its keep and its hour and day keep the count; an
        unfolded one stays; purging the jobs never moves a counter."""
        ops = parity.introspection
        for n in range(3):
            await parity.job_in_state("completed", idempotency_key=f"c{n}")
        parity.clock.advance(2 * 60_000)
        assert await ops.rollup_counters(parity.clock.now_ms()) >= 1
        parity.clock.advance(3 * HOUR_MS)
        await parity.job_in_state("completed", idempotency_key="unfolded")
        parity.clock.advance(3 * HOUR_MS)
        cut = _cut(parity)
        assert await _drain(parity, "jobs", cut) == 4
        assert await _drain(parity, "counters", cut) >= 1
        minutes = await ops.counters("minute", 0)
        assert [(b.outcome, b.count) for b in minutes] == [("completed", 1)]
        for tier in ("hour", "day"):
            buckets = await ops.counters(tier, 0)
            assert sum(b.count for b in buckets if b.outcome == "completed") == 3
        parity.clock.advance(4 * DAY_MS)  # past the hour and day keeps
        await _drain(parity, "counters", _cut(parity))
        assert await ops.counters("hour", 0) == []
        assert await ops.counters("day", 0) == []
