"""The Redis scheduler state and leader against the real server: the fence, the fire, the pause, the lease."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from redis.asyncio import Redis

from xjobs import App, job, task
from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions, NewJob
from xjobs.contract.stores import LeaderElection, SchedulerState, TaskFire
from xjobs.testing import rows
from xjobs_redis.backend import open_backend
from xjobs_redis.keys import Keys

pytestmark = pytest.mark.asyncio

QUEUE = "cron"
TASK = "nightly"
MINUTE_MS = 60_000
TTL_MS = 30_000


def state_of(backend: Backend) -> SchedulerState:
    assert backend.scheduler is not None
    return backend.scheduler


def leader_of(backend: Backend) -> LeaderElection:
    assert backend.leader is not None
    return backend.leader


def new_job(**overrides: Any) -> NewJob:
    return rows.new_job(**{"name": "cron_job", "queue": QUEUE, **overrides})


@pytest_asyncio.fixture
async def twin(url: str, prefix: str, clock: ManualClock) -> AsyncIterator[Backend]:
    """A second backend on the same prefix and clock: another scheduler process."""
    backend = await open_backend(url, clock=clock, prefix=prefix)
    try:
        yield backend
    finally:
        await backend.close()


async def queued(client: Redis, prefix: str) -> int:
    """How many jobs QUEUE holds (ready or delayed)."""
    keys = Keys(prefix)
    return int(await client.zcard(keys.ready(QUEUE))) + int(await client.zcard(keys.delayed(QUEUE)))


class TestArm:
    async def test_arm_moves_the_watermark_only_from_the_value_read(
        self, manual_backend: Backend
    ) -> None:
        state = state_of(manual_backend)
        assert await state.watermarks([TASK]) == {}
        assert await state.arm(TASK, None, 100)
        assert not await state.arm(TASK, None, 200)  # it has a row now
        assert not await state.arm(TASK, 99, 200)
        assert await state.arm(TASK, 100, 200)
        assert await state.watermarks([TASK, "never-armed"]) == {TASK: 200}

    async def test_watermarks_of_several_tasks_in_one_read(self, manual_backend: Backend) -> None:
        state = state_of(manual_backend)
        assert await state.watermarks([]) == {}
        for i, name in enumerate(["a", "b:with:colons", "c {tagged}"]):
            assert await state.arm(name, None, 1_000 + i)
        assert await state.watermarks(["c {tagged}", "a", "z", "b:with:colons"]) == {
            "a": 1_000,
            "b:with:colons": 1_001,
            "c {tagged}": 1_002,
        }

    async def test_arming_never_records_a_fire(self, manual_backend: Backend) -> None:
        state = state_of(manual_backend)
        assert await state.arm(TASK, None, 100)
        assert await state.task_fires() == {}
        assert await state.task_fires([TASK]) == {}


class TestFire:
    async def test_a_fire_moves_the_watermark_enqueues_and_records(
        self, manual_backend: Backend, clock: ManualClock
    ) -> None:
        state = state_of(manual_backend)
        assert await state.arm(TASK, None, 1_000)
        row = new_job(priority=3)
        assert await state.fire(TASK, 1_000, 2_000, row)
        assert await state.watermarks([TASK]) == {TASK: 2_000}
        assert await state.task_fires() == {TASK: TaskFire(TASK, 2_000, row.id, clock.now_ms())}
        record = await manual_backend.jobs.get(row.id)
        assert record is not None
        assert (record.state, record.queue, record.priority, record.run_id) == (
            "ready",
            QUEUE,
            3,
            row.run_id,
        )
        claimed = await manual_backend.jobs.claim(ClaimOptions("w-1", {QUEUE: 5}, TTL_MS))
        assert [j.id for j in claimed.jobs] == [row.id]

    async def test_the_first_fire_of_a_task_without_a_watermark(
        self, manual_backend: Backend
    ) -> None:
        state = state_of(manual_backend)
        row = new_job()
        assert await state.fire(TASK, None, 5_000, row)
        assert await state.watermarks([TASK]) == {TASK: 5_000}
        assert (await state.task_fires([TASK]))[TASK].job_id == row.id

    async def test_a_future_job_goes_to_the_delayed_index(
        self, manual_backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        row = new_job(run_at_ms=clock.now_ms() + MINUTE_MS)
        assert await state_of(manual_backend).fire(TASK, None, 1_000, row)
        assert await client.zscore(Keys(prefix).delayed(QUEUE), Keys(prefix).job(QUEUE, row.id))

    async def test_a_fire_that_loses_the_cas_enqueues_nothing(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        state = state_of(manual_backend)
        assert await state.arm(TASK, None, 1_000)
        stale_none, stale_value = new_job(), new_job()
        assert not await state.fire(TASK, None, 2_000, stale_none)
        assert not await state.fire(TASK, 500, 2_000, stale_value)
        assert await state.watermarks([TASK]) == {TASK: 1_000}
        assert await state.task_fires() == {}
        assert await manual_backend.jobs.get(stale_none.id) is None
        assert await manual_backend.jobs.get(stale_value.id) is None
        assert await queued(client, prefix) == 0
        live = await client.hlen(Keys(prefix).live(QUEUE))
        assert live == 0, "a lost fire took an idempotency namespace"

    async def test_concurrent_fires_from_the_same_watermark_fire_once(
        self, manual_backend: Backend, twin: Backend, client: Redis, prefix: str
    ) -> None:
        mine, theirs = state_of(manual_backend), state_of(twin)
        assert await mine.arm(TASK, None, 1_000)
        # Distinct ids AND keys, so no dedupe could hide a second enqueue.
        contenders = [new_job() for _ in range(16)]
        fires = [
            (mine if i % 2 else theirs).fire(TASK, 1_000, 2_000, row)
            for i, row in enumerate(contenders)
        ]
        moved = await asyncio.gather(*fires)
        assert moved.count(True) == 1
        winner = contenders[moved.index(True)]
        assert await queued(client, prefix) == 1
        for row in contenders:
            found = await manual_backend.jobs.get(row.id)
            assert (found is not None) == (row is winner)
        assert (await theirs.task_fires([TASK]))[TASK].job_id == winner.id
        assert await mine.watermarks([TASK]) == {TASK: 2_000}

    async def test_a_deduped_fire_records_the_live_jobs_id(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        state = state_of(manual_backend)
        live = new_job(idempotency_key="task:2000:k", tenant_id="org-1")
        (enqueued,) = await manual_backend.jobs.enqueue([live])
        assert not enqueued.deduped
        twin_row = new_job(idempotency_key="task:2000:k", tenant_id="org-1")
        assert await state.fire(TASK, None, 2_000, twin_row)
        assert (await state.task_fires([TASK]))[TASK].job_id == live.id
        assert await manual_backend.jobs.get(twin_row.id) is None
        assert await queued(client, prefix) == 1

    async def test_a_fire_repeating_an_id_answers_that_job(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        """A row whose id names a job already (a retried fire whose reply was lost) is that job."""
        state = state_of(manual_backend)
        row = new_job()
        assert await state.fire(TASK, None, 1_000, row)
        assert await state.fire(TASK, 1_000, 2_000, row)
        fired = (await state.task_fires([TASK]))[TASK]
        assert (fired.occurrence_ms, fired.job_id) == (2_000, row.id)
        assert await queued(client, prefix) == 1

    async def test_the_server_clock_stamps_a_fire(self, server_backend: Backend) -> None:
        state = state_of(server_backend)
        before = time.time_ns() // 1_000_000
        assert await state.fire(TASK, None, 1_000, new_job())
        after = time.time_ns() // 1_000_000
        fired = (await state.task_fires([TASK]))[TASK]
        assert before - 1_000 <= fired.fired_at_ms <= after + 1_000
        record = await server_backend.jobs.get(fired.job_id)
        assert record is not None
        assert record.created_at_ms == fired.fired_at_ms


class TestTaskFires:
    async def test_the_last_fire_of_each_task(
        self, manual_backend: Backend, clock: ManualClock
    ) -> None:
        state = state_of(manual_backend)
        first, second, other = new_job(), new_job(), new_job()
        assert await state.fire(TASK, None, 1_000, first)
        fired_first = clock.now_ms()
        clock.advance(MINUTE_MS)
        assert await state.fire(TASK, 1_000, 2_000, second)
        assert await state.fire("weekly", None, 7_000, other)
        assert await state.arm(TASK, 2_000, 3_000)  # a skip keeps the last fire
        expected = {
            TASK: TaskFire(TASK, 2_000, second.id, fired_first + MINUTE_MS),
            "weekly": TaskFire("weekly", 7_000, other.id, fired_first + MINUTE_MS),
        }
        assert await state.task_fires() == expected
        assert await state.task_fires(None) == expected
        assert await state.task_fires(["weekly", "never"]) == {"weekly": expected["weekly"]}
        assert await state.task_fires([]) == {}


class TestPause:
    async def test_pause_and_resume_answer_what_changed(self, manual_backend: Backend) -> None:
        state = state_of(manual_backend)
        assert await state.paused([TASK, "weekly"]) == set()
        assert await state.paused([]) == set()
        assert await state.pause(TASK)
        assert not await state.pause(TASK)  # it was paused already
        assert await state.paused([TASK, "weekly"]) == {TASK}
        assert await state.resume(TASK)
        assert not await state.resume(TASK)
        assert not await state.resume("weekly")
        assert await state.paused([TASK, "weekly"]) == set()

    async def test_a_paused_task_keeps_its_watermark(self, manual_backend: Backend) -> None:
        state = state_of(manual_backend)
        assert await state.arm(TASK, None, 1_000)
        assert await state.pause(TASK)
        assert await state.watermarks([TASK]) == {TASK: 1_000}
        assert await state.resume(TASK)
        assert await state.watermarks([TASK]) == {TASK: 1_000}


class TestLeader:
    async def test_one_candidate_leads_and_renews(self, manual_backend: Backend) -> None:
        leader = leader_of(manual_backend)
        assert await leader.acquire("a", TTL_MS)
        assert not await leader.acquire("b", TTL_MS)
        assert await leader.acquire("a", TTL_MS)  # a renewal

    async def test_concurrent_candidates_one_wins(
        self, manual_backend: Backend, twin: Backend
    ) -> None:
        leaders = [leader_of(manual_backend), leader_of(twin)]
        won = await asyncio.gather(*(leaders[i % 2].acquire(f"c-{i}", TTL_MS) for i in range(16)))
        assert won.count(True) == 1

    async def test_a_lapsed_holder_is_replaced_and_cannot_renew_over_the_new_one(
        self, manual_backend: Backend, clock: ManualClock
    ) -> None:
        leader = leader_of(manual_backend)
        assert await leader.acquire("a", TTL_MS)
        clock.advance(TTL_MS - 1)
        assert not await leader.acquire("b", TTL_MS)  # a's lease is still live
        clock.advance(1)
        assert await leader.acquire("b", TTL_MS)  # expired at its instant
        assert not await leader.acquire("a", TTL_MS)  # the fenced renewal
        clock.advance(TTL_MS - 1)
        assert await leader.acquire("b", TTL_MS)  # b renews before it lapses
        clock.advance(TTL_MS - 1)
        assert not await leader.acquire("a", TTL_MS)

    async def test_a_lapsed_holder_renews_when_no_one_took_over(
        self, manual_backend: Backend, clock: ManualClock
    ) -> None:
        leader = leader_of(manual_backend)
        assert await leader.acquire("a", TTL_MS)
        clock.advance(TTL_MS * 2)
        assert await leader.acquire("a", TTL_MS)
        assert not await leader.acquire("b", TTL_MS)

    async def test_release_only_when_ours(self, manual_backend: Backend) -> None:
        leader = leader_of(manual_backend)
        await leader.release("a")  # no holder: a no-op
        assert await leader.acquire("a", TTL_MS)
        await leader.release("b")
        assert not await leader.acquire("b", TTL_MS)
        await leader.release("a")
        assert await leader.acquire("b", TTL_MS)

    async def test_the_server_clock_expires_the_key_with_the_lease(
        self, server_backend: Backend, client: Redis, prefix: str
    ) -> None:
        leader, key = leader_of(server_backend), Keys(prefix).scheduler_leader()
        assert await leader.acquire("a", 200)
        assert 0 < await client.pttl(key) <= 200
        assert not await leader.acquire("b", 200)
        await asyncio.sleep(0.3)
        assert await client.exists(key) == 0
        assert await leader.acquire("b", 200)
        assert not await leader.acquire("a", 200)
        await leader.release("b")
        assert await client.exists(key) == 0


class ReportInput(BaseModel):
    day: date


async def build_report(ctx: object, input: ReportInput) -> None:
    """The job the minutely task fires."""


async def test_two_schedulers_over_redis_fire_an_occurrence_once(
    manual_backend: Backend, clock: ManualClock
) -> None:
    report = job(
        build_report, name="report", tenant="none", idempotency_key=lambda i: i.day.isoformat()
    )
    minutely = task(
        job=report,
        cron="* * * * *",
        tz="UTC",
        input=lambda at: ReportInput(day=at.date()),
        name="minutely",
    )
    async with App(manual_backend, tasks=[minutely]) as app:
        first, second = app.scheduler(), app.scheduler()
        try:
            await first.tick()  # leads, arms at now
            await second.tick()
            clock.advance(MINUTE_MS)
            await second.tick()
            await first.tick()
            fired = await app.task_fires()
            assert first.stats.fired + second.stats.fired == 1
            occurrence = clock.now_ms() - clock.now_ms() % MINUTE_MS
            assert fired["minutely"].occurrence_ms == occurrence
            record = await app.get_job(fired["minutely"].job_id)
            day = datetime.fromtimestamp(occurrence / 1000, UTC).date().isoformat()
            assert (record.name, record.idempotency_key) == ("report", f"task:{occurrence}:{day}")
        finally:
            await first.stop()
            await second.stop()
