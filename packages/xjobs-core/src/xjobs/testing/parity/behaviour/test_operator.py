"""Parity: the operator surface through `app.operator` and real worker runs (semantics.md, "Operator surface")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from xjobs import JobContext, Retry, job, task
from xjobs.contract.driver import BulkResult
from xjobs.contract.introspection import MAX_JOB_PAGE, JobFilter
from xjobs.errors import FilterInvalidError, JobNotPromotableError, JobPageInvalidError
from xjobs.operate.filters import job_filter
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, NOW_RETRY, QUEUE, Item, key_of, org_of, within

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("introspection")]


class TestPaging:
    async def test_paging_with_the_cursor_visits_each_job_once_newest_first(
        self, parity: ParityEnv
    ) -> None:
        """Rule: keyset pages by an opaque cursor visit every job exactly once, newest first."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]) as app:
            for n in range(0, 120, 40):
                await body.enqueue_many([Item(key=f"k{i}") for i in range(n, n + 40)])
                parity.clock.advance(1)
            seen: list[str] = []
            cursor = None
            while True:
                page = await app.operator.list_jobs(limit=25, after=cursor)
                seen += [j.id for j in page.jobs]
                cursor = page.cursor
                if cursor is None:
                    break
            everything = await app.operator.list_jobs(limit=MAX_JOB_PAGE)
        assert len(seen) == len(set(seen)) == 120
        assert seen == [j.id for j in everything.jobs]

    async def test_a_cursor_of_another_filter_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a foreign cursor is XJOBS_JOB_PAGE_INVALID."""
        for _ in range(3):
            await parity.enqueue()
        async with parity.app() as app:
            page = await app.operator.list_jobs(limit=1)
            assert page.cursor is not None
            with pytest.raises(JobPageInvalidError) as refused:
                await app.operator.list_jobs(JobFilter(queue="other"), after=page.cursor)
        assert refused.value.code == "XJOBS_JOB_PAGE_INVALID"

    @pytest.mark.parametrize("cursor", ["garbage", "", "eyJ4IjogMX0", "A" * 600])
    async def test_a_garbled_cursor_is_refused(self, parity: ParityEnv, cursor: str) -> None:
        """Rule: a garbled cursor is XJOBS_JOB_PAGE_INVALID, never a bare error."""
        async with parity.app() as app:
            with pytest.raises(JobPageInvalidError):
                await app.operator.list_jobs(after=cursor)

    @pytest.mark.parametrize("limit", [0, -1, MAX_JOB_PAGE + 1])
    async def test_a_page_past_the_maximum_is_refused(self, parity: ParityEnv, limit: int) -> None:
        """Rule: a page over MAX_JOB_PAGE (or under one) is XJOBS_JOB_PAGE_INVALID."""
        async with parity.app() as app:
            with pytest.raises(JobPageInvalidError):
                await app.operator.list_jobs(limit=limit)

    def test_a_bad_filter_is_refused_at_the_door(self) -> None:
        """Rule: an unknown state, a bad queue name or an empty range is XJOBS_FILTER_INVALID."""
        for bad in (
            {"states": ["zombie"]},
            {"queue": "a:b"},
            {"created_after_ms": 5, "created_before_ms": 5},
            {"name": ""},
        ):
            with pytest.raises(FilterInvalidError):
                job_filter(**bad)


class TestSteerThroughTheWorker:
    async def test_retrying_every_dead_job_of_a_name_then_a_worker_completes_them(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a bulk retry requeues the dead jobs of a name; a worker then completes them."""
        healed = False

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=1))
        async def flaky(ctx: JobContext, input: Item) -> None:
            if not healed:
                raise RuntimeError("the dependency is down")

        async with parity.app([flaky]) as app:
            ids = [(await flaky.enqueue(Item(key=f"k{n}"))).job_id for n in range(3)]
            await app.run_worker(lease=LEASE, until_idle=True)
            assert {(await app.get_job(i)).state for i in ids} == {"dead"}
            healed = True
            where = job_filter(states=["dead"], name=flaky.name)
            assert await app.operator.retry_where(where) == BulkResult(3, 0)
            stats = await app.run_worker(lease=LEASE, until_idle=True)
            states = {(await app.get_job(i)).state for i in ids}
        assert (states, stats.completed) == ({"completed"}, 3)

    async def test_a_paused_queue_runs_nothing_until_resumed(self, parity: ParityEnv) -> None:
        """Rule: a paused queue's jobs are not claimed, across worker runs; resumed, they run."""
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        async with parity.app([body]) as app:
            await app.operator.pause("queue", QUEUE)
            await body.enqueue(Item())
            first = await app.run_worker(lease=LEASE, until_idle=True)
            second = await app.run_worker(lease=LEASE, until_idle=True)
            assert (ran, first.claimed, second.claimed) == ([], 0, 0)
            await app.operator.resume("queue", QUEUE)
            await app.run_worker(lease=LEASE, until_idle=True)
        assert ran == ["k-1"]

    async def test_a_paused_job_name_waits_while_others_run(self, parity: ParityEnv) -> None:
        """Rule: pausing a job name holds its jobs; the other jobs of the queue run."""
        ran: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def held(ctx: JobContext, input: Item) -> None:
            ran.append("held")

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def free(ctx: JobContext, input: Item) -> None:
            ran.append("free")

        async with parity.app([held, free]) as app:
            await app.operator.pause("job", held.name)
            await held.enqueue(Item())
            await free.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            assert ran == ["free"]
            await app.operator.resume("job", held.name)
            await app.run_worker(lease=LEASE, until_idle=True)
        assert ran == ["free", "held"]

    async def test_promoting_a_delayed_job_runs_it_now(self, parity: ParityEnv) -> None:
        """Rule: promote makes a delayed job due now; a non-ready job is refused."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]) as app:
            result = await body.enqueue(Item(), delay=timedelta(hours=1))
            await app.operator.promote(result.job_id)
            await app.run_worker(lease=LEASE, until_idle=True)
            assert (await app.get_job(result.job_id)).state == "completed"
            with pytest.raises(JobNotPromotableError):
                await app.operator.promote(result.job_id)

    async def test_worker_runs_move_the_counters(self, parity: ParityEnv) -> None:
        """Rule: the settle room's endings reach the counters: completed, retried, dead-lettered."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            if input.key == "bad":
                raise RuntimeError("always")

        async with parity.app([body]) as app:
            await body.enqueue(Item(key="good"))
            await body.enqueue(Item(key="bad"))
            for _ in range(NOW_RETRY.attempts):
                await app.run_worker(lease=LEASE, until_idle=True)
            buckets = await app.operator.counters("minute", 0)
        totals: dict[str, int] = {}
        for b in buckets:
            assert b.name == body.name
            totals[b.outcome] = totals.get(b.outcome, 0) + b.count
        assert totals == {"completed": 1, "retried": 2, "dead-lettered": 1}


class TestRead:
    async def test_get_job_shows_redacted_input_steps_and_every_error(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a payload is shown through `redact_input`; every attempt's error is kept."""

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=NOW_RETRY,
            redact_input=lambda i: {"org": i.org, "key": "***"},
        )
        async def body(ctx: JobContext, input: Item) -> None:
            raise RuntimeError(f"attempt {ctx.attempt} failed")

        async with parity.app([body]) as app:
            result = await body.enqueue(Item(key="secret"))
            for _ in range(NOW_RETRY.attempts):
                await app.run_worker(lease=LEASE, until_idle=True)
            detail = await app.operator.get_job(result.job_id)
        assert detail.input == {"org": "org-1", "key": "***"}
        assert detail.record.state == "dead"
        assert [(e.attempt, e.error_class, e.message) for e in detail.errors] == [
            (n, "RuntimeError", f"attempt {n} failed") for n in (1, 2, 3)
        ]

    @pytest.mark.requires("workers")
    async def test_workers_lists_a_live_worker_with_its_running_job(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the registry's live rows show the jobs each worker runs now."""
        started, release = asyncio.Event(), asyncio.Event()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            started.set()
            await release.wait()

        async with parity.app([body]) as app:
            result = await body.enqueue(Item())
            worker = app.worker(lease=LEASE)
            await worker.start()
            try:
                await within(started.wait(), what="the body to start")
                views = await app.operator.workers()
            finally:
                release.set()
                await worker.stop()
        (view,) = views
        assert (view.info.id, view.running) == (worker.id, (result.job_id,))

    @pytest.mark.requires("scheduler")
    async def test_tasks_lists_schedule_next_occurrence_and_pause(self, parity: ParityEnv) -> None:
        """Rule: a task shows its cron, zone, next occurrence, last fire and pause."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def report(ctx: JobContext, input: Item) -> None:
            return None

        nightly = task(
            job=report, cron="0 3 * * *", tz="UTC", input=lambda _: Item(), name="nightly"
        )
        async with parity.app([report], tasks=[nightly]) as app:
            await app.pause_task("nightly")
            (view,) = await app.operator.tasks()
        assert (view.name, view.job, view.cron, view.tz, view.paused, view.last_fire) == (
            "nightly",
            report.name,
            "0 3 * * *",
            "UTC",
            True,
            None,
        )
        assert view.next_ms > parity.clock.now_ms()


@pytest.mark.requires("scheduler", "leader")
class TestCounterRollup:
    async def test_the_scheduler_leader_folds_closed_minutes_into_hours(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the scheduler leader folds minute buckets into hour and day tiers."""

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        nightly = task(job=body, cron="0 3 * * *", tz="UTC", input=lambda _: Item(), name="n")
        async with parity.app([body], tasks=[nightly]) as app:
            await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            parity.clock.advance(60_000)
            scheduler = app.scheduler()
            await scheduler.tick()
            hours = await app.operator.counters("hour", 0)
        assert [(b.name, b.outcome, b.count) for b in hours] == [(body.name, "completed", 1)]
