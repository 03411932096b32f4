"""Parity: the scheduler role on a manual clock — arming, fires, catch-up, pauses, leadership (semantics.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs import App, Scheduler, TaskHandle, job, task
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import LeaderElection, SchedulerState, TaskFire
from xjobs.declare.task import CatchUp
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("scheduler", "leader")]

QUEUE = "parity-cron"
HOUR = 3_600_000
START = (
    1_767_225_600_000  # the ManualClock's start: 2026-01-01T00:00:00Z, an occurrence of "0 * * * *"
)


class At(BaseModel):
    """A fired job's input: the occurrence it was built for, as ISO text in the task's zone."""

    at: str


def hourly(
    *,
    catch_up: CatchUp = "latest",
    max_catch_up: int = 100,
    cron: str = "0 * * * *",
    tz: str = "UTC",
    input: Any = None,
) -> TaskHandle:
    """A task firing a `report` job (keyed by its occurrence) on `cron` in `tz`."""

    @job(tenant="none", idempotency_key=lambda value: value.at, queue=QUEUE)
    async def report(ctx: object, value: At) -> None:
        """The job the scheduler fires."""

    return task(
        job=report,
        cron=cron,
        tz=tz,
        input=input or (lambda occurrence: At(at=occurrence.isoformat())),
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        name="report.hourly",
    )


class ForcedLeader:
    """A leader election that says yes to everyone: two schedulers lead at once (the race the fence stops)."""

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        return True

    async def release(self, candidate: str) -> None:
        return None


class CountingLeader:
    """The backend's own leader election, with each round trip counted."""

    def __init__(self, inner: LeaderElection) -> None:
        self.inner = inner
        self.acquires = 0

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        self.acquires += 1
        return await self.inner.acquire(candidate, ttl_ms)

    async def release(self, candidate: str) -> None:
        await self.inner.release(candidate)


class CountingState:
    """The backend's own scheduler state, with each call counted."""

    def __init__(self, inner: SchedulerState) -> None:
        self.inner = inner
        self.calls = 0

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        self.calls += 1
        return await self.inner.watermarks(tasks)

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        self.calls += 1
        return await self.inner.arm(task, previous_ms, watermark_ms)

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        self.calls += 1
        return await self.inner.fire(task, previous_ms, occurrence_ms, job)

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        self.calls += 1
        return await self.inner.task_fires(tasks)

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        self.calls += 1
        return await self.inner.paused(tasks)

    async def pause(self, task: str) -> bool:
        self.calls += 1
        return await self.inner.pause(task)

    async def resume(self, task: str) -> bool:
        self.calls += 1
        return await self.inner.resume(task)


async def fired(parity: ParityEnv) -> list[str]:
    """The occurrence keys of every job the scheduler enqueued, oldest first (claiming them)."""
    result = await parity.claim({QUEUE: 1000})
    keys = []
    for claimed in result.jobs:
        record = await parity.record(claimed.id)
        keys.append(record.idempotency_key)
    return sorted(keys)


def key(occurrence_ms: int) -> str:
    """The key of the fire of `occurrence_ms` for `hourly()`'s job in UTC."""
    return f"task:{occurrence_ms}:{datetime.fromtimestamp(occurrence_ms / 1000, UTC).isoformat()}"


async def open_app(parity: ParityEnv, cron_task: TaskHandle) -> App:
    return await parity.app(tasks=[cron_task]).open()


async def watermark(parity: ParityEnv) -> int | None:
    assert parity.backend.scheduler is not None
    return (await parity.backend.scheduler.watermarks(["report.hourly"])).get("report.hourly")


async def down_for(parity: ParityEnv, scheduler: Scheduler, ms: int) -> None:
    """The scheduler saw the clock at START, then nothing for `ms`; it ticks once on return."""
    await scheduler.tick()
    parity.clock.advance(ms)
    await scheduler.tick()


class TestArmAndFire:
    async def test_a_task_seen_for_the_first_time_is_armed_at_now_and_fires_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: first sight arms the watermark at now; the past never fires."""
        parity.clock.advance(HOUR // 2)
        app = await open_app(parity, hourly())
        scheduler = app.scheduler()
        await scheduler.tick()
        assert await watermark(parity) == START + HOUR // 2
        assert await fired(parity) == []
        assert await app.task_fires() == {}

    async def test_an_occurrence_fires_one_job_with_the_occurrence_scoped_key(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the fire's key is `task:<occurrence_ms>:<job key>`, and `task_fires()` records it."""
        app = await open_app(parity, hourly())
        scheduler = app.scheduler()
        await scheduler.tick()
        parity.clock.advance(HOUR)
        await scheduler.tick()
        await scheduler.tick()  # the same instant again fires nothing more
        assert await fired(parity) == [key(START + HOUR)]
        fire = (await app.task_fires())["report.hourly"]
        assert (fire.occurrence_ms, fire.fired_at_ms) == (START + HOUR, START + HOUR)
        assert (await parity.record(fire.job_id)).name == "report"
        assert await watermark(parity) == START + HOUR
        assert scheduler.stats.fired == 1

    async def test_the_input_is_built_from_the_occurrence_in_the_tasks_zone(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the input callable receives the occurrence as an aware datetime in the task's zone."""
        app = await open_app(parity, hourly(cron="0 10 * * *", tz="Europe/Paris"))
        scheduler = app.scheduler()
        await scheduler.tick()
        parity.clock.advance(9 * HOUR)  # 10:00 in Paris is 09:00 UTC in January
        await scheduler.tick()
        fire = (await app.task_fires())["report.hourly"]
        record = await parity.record(fire.job_id)
        assert json.loads(record.payload) == {"at": "2026-01-01T10:00:00+01:00"}
        assert fire.occurrence_ms == START + 9 * HOUR

    async def test_a_concurrent_tick_joins_the_round_in_flight(self, parity: ParityEnv) -> None:
        """Rule: one dispatch round at a time; a second `tick()` joins it instead of starting one."""
        app = await open_app(parity, hourly())
        scheduler = app.scheduler()
        await asyncio.gather(scheduler.tick(), scheduler.tick(), scheduler.tick())
        assert scheduler.stats.rounds == 1

    async def test_a_manual_enqueue_uses_the_plain_key_and_moves_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `task.enqueue()` runs the job now with its plain key; watermark and fires stay."""
        cron_task = hourly()
        app = await open_app(parity, cron_task)
        await app.scheduler().tick()
        occurrence = datetime(2026, 1, 1, 5, tzinfo=UTC)
        result = await cron_task.enqueue(occurrence)
        record = await parity.record(result.job_id)
        assert record.idempotency_key == occurrence.isoformat()
        assert await watermark(parity) == START
        assert await app.task_fires() == {}

    async def test_an_input_that_cannot_be_built_passes_its_occurrence_and_the_next_fires(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a failing input builder is logged and its occurrence passed; it never spins the round."""
        calls: list[datetime] = []

        def flaky(occurrence: datetime) -> At:
            calls.append(occurrence)
            if len(calls) == 1:
                raise ValueError("the report source is down")
            return At(at=occurrence.isoformat())

        app = await open_app(parity, hourly(input=flaky))
        scheduler = app.scheduler()
        await scheduler.tick()
        parity.clock.advance(HOUR)
        await scheduler.tick()
        assert scheduler.stats.input_failed == 1
        assert await watermark(parity) == START + HOUR
        parity.clock.advance(HOUR)
        await scheduler.tick()
        assert await fired(parity) == [key(START + 2 * HOUR)]


class TestCatchUp:
    async def test_latest_fires_the_latest_missed_occurrence_once(self, parity: ParityEnv) -> None:
        """Rule: `latest` after downtime fires the newest missed occurrence once; the watermark rides it."""
        app = await open_app(parity, hourly(catch_up="latest"))
        scheduler = app.scheduler()
        await down_for(parity, scheduler, 5 * HOUR + 20 * 60_000)
        assert await fired(parity) == [key(START + 5 * HOUR)]
        assert await watermark(parity) == START + 5 * HOUR

    async def test_skip_fires_none_of_the_missed_and_the_next_on_time(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `skip` fires none of the missed occurrences; the next on-time one fires."""
        app = await open_app(parity, hourly(catch_up="skip"))
        scheduler = app.scheduler()
        await down_for(parity, scheduler, 5 * HOUR + 20 * 60_000)
        assert await fired(parity) == []
        assert await watermark(parity) == START + 5 * HOUR
        assert await app.task_fires() == {}
        parity.clock.set(START + 6 * HOUR)
        await scheduler.tick()
        assert await fired(parity) == [key(START + 6 * HOUR)]

    async def test_skip_still_fires_an_occurrence_seen_within_the_grace(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an occurrence seen within `misfire_grace` of its time is on time, not missed."""
        app = await open_app(parity, hourly(catch_up="skip"))
        scheduler = app.scheduler(misfire_grace=timedelta(seconds=60))
        await down_for(parity, scheduler, HOUR + 59_000)
        assert await fired(parity) == [key(START + HOUR)]

    async def test_all_fires_each_missed_occurrence_in_order(self, parity: ParityEnv) -> None:
        """Rule: `all` fires every missed occurrence, oldest first; `task_fires()` ends on the newest."""
        app = await open_app(parity, hourly(catch_up="all"))
        scheduler = app.scheduler()
        await down_for(parity, scheduler, 5 * HOUR + 20 * 60_000)
        assert await fired(parity) == [key(START + n * HOUR) for n in range(1, 6)]
        assert (await app.task_fires())["report.hourly"].occurrence_ms == START + 5 * HOUR
        assert scheduler.stats.fired == 5

    async def test_all_is_bounded_by_max_catch_up_keeping_the_newest(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `all` fires at most `max_catch_up` occurrences: the newest ones."""
        app = await open_app(parity, hourly(catch_up="all", max_catch_up=3))
        scheduler = app.scheduler()
        await down_for(parity, scheduler, 10 * HOUR)
        assert await fired(parity) == [key(START + n * HOUR) for n in (8, 9, 10)]
        assert await watermark(parity) == START + 10 * HOUR


class TestPauses:
    async def test_a_paused_task_fires_nothing_and_keeps_its_watermark(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a paused task fires nothing, and its watermark stays where it was."""
        app = await open_app(parity, hourly())
        scheduler = app.scheduler()
        await scheduler.tick()
        assert await app.pause_task("report.hourly") is True
        assert await app.pause_task("report.hourly") is False
        parity.clock.advance(3 * HOUR)
        await scheduler.tick()
        assert await fired(parity) == []
        assert await watermark(parity) == START

    @pytest.mark.parametrize(
        ("catch_up", "expected"),
        [("latest", [3]), ("skip", []), ("all", [1, 2, 3])],
    )
    async def test_resume_applies_the_tasks_own_catch_up(
        self, parity: ParityEnv, catch_up: CatchUp, expected: list[int]
    ) -> None:
        """Rule: on resume, the paused time is caught up by the task's own policy."""
        app = await open_app(parity, hourly(catch_up=catch_up))
        scheduler = app.scheduler()
        await scheduler.tick()
        await app.pause_task("report.hourly")
        parity.clock.advance(3 * HOUR + 30 * 60_000)
        await scheduler.tick()
        assert await app.resume_task("report.hourly") is True
        parity.clock.advance(scheduler.options.pause_recheck_ms)  # the paused task asks again
        await scheduler.tick()
        assert await fired(parity) == [key(START + n * HOUR) for n in expected]

    async def test_pausing_an_unknown_task_is_refused(self, parity: ParityEnv) -> None:
        """Rule: pause and resume name a registered task (`XJOBS_TASK_NOT_REGISTERED`)."""
        app = await open_app(parity, hourly())
        for call in (app.pause_task, app.resume_task):
            with pytest.raises(XJobsError) as caught:
                await call("report.nightly")
            assert caught.value.code == "XJOBS_TASK_NOT_REGISTERED"


class TestLeadership:
    async def test_two_schedulers_leading_at_once_fire_each_occurrence_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the fire's watermark fence, not the lease, makes a fire happen once."""
        app = await open_app(parity, hourly(catch_up="all"))
        first = app.scheduler(leader=ForcedLeader())
        second = app.scheduler(leader=ForcedLeader())
        await asyncio.gather(first.tick(), second.tick())
        for _ in range(3):
            parity.clock.advance(HOUR)
            await asyncio.gather(first.tick(), second.tick())
        assert await fired(parity) == [key(START + n * HOUR) for n in (1, 2, 3)]
        assert first.stats.fired + second.stats.fired == 3

    async def test_a_scheduler_that_lost_a_race_reads_the_watermark_again(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a fire refused by the fence reloads the watermark; nothing fires twice after it."""
        app = await open_app(parity, hourly())
        first = app.scheduler(leader=ForcedLeader())
        second = app.scheduler(leader=ForcedLeader())
        await first.tick()
        await second.tick()
        parity.clock.advance(HOUR)
        await first.tick()
        await second.tick()  # its memory still says START: the fence refuses, it reloads
        assert second.stats.lost_races == 1
        parity.clock.advance(HOUR)
        await second.tick()
        await first.tick()
        assert await fired(parity) == [key(START + HOUR), key(START + 2 * HOUR)]

    async def test_only_the_leader_fires(self, parity: ParityEnv) -> None:
        """Rule: of two schedulers on the backend's leader election, only the holder fires."""
        app = await open_app(parity, hourly())
        ttl, renew = timedelta(hours=3), timedelta(hours=1)  # the lease outlives the hour below
        first = app.scheduler(leader_ttl=ttl, renew_every=renew)
        second = app.scheduler(leader_ttl=ttl, renew_every=renew)
        await first.tick()
        await second.tick()
        assert (first.leading, second.leading) == (True, False)
        parity.clock.advance(HOUR)
        await second.tick()
        assert await fired(parity) == []
        await first.tick()
        assert await fired(parity) == [key(START + HOUR)]

    async def test_closing_the_leader_releases_it_and_the_other_takes_over(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `close()` waits out the round, then releases; the next candidate leads at once."""
        app = await open_app(parity, hourly())
        first, second = app.scheduler(), app.scheduler()
        await first.tick()
        await second.tick()
        await first.close()
        parity.clock.advance(HOUR)
        await second.tick()
        assert second.leading
        assert await fired(parity) == [key(START + HOUR)]

    async def test_a_lapsed_leader_is_replaced_and_no_occurrence_fires_twice(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a leader that stops renewing loses the lease after its TTL; the next one fires on."""
        app = await open_app(parity, hourly(catch_up="all"))
        first = app.scheduler(leader_ttl=timedelta(seconds=30), renew_every=timedelta(seconds=10))
        second = app.scheduler(leader_ttl=timedelta(seconds=30), renew_every=timedelta(seconds=10))
        await first.tick()
        parity.clock.advance(HOUR)
        await first.tick()  # fires START + HOUR, then goes silent (killed)
        parity.clock.advance(HOUR + 31_000)
        await second.tick()
        assert second.leading
        assert await fired(parity) == [key(START + HOUR), key(START + 2 * HOUR)]
        assert await first.still_leading() is False

    async def test_leadership_is_answered_from_memory_within_renew_every(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `still_leading()` renews at most once per `renew_every`; other asks answer from memory."""
        assert parity.backend.leader is not None
        leader = CountingLeader(parity.backend.leader)
        app = await open_app(parity, hourly())
        scheduler = app.scheduler(leader=leader, renew_every=timedelta(seconds=10))
        for _ in range(5):
            assert await scheduler.still_leading()
        assert leader.acquires == 1
        parity.clock.advance(9_999)
        await scheduler.tick()
        assert leader.acquires == 1
        parity.clock.advance(1)
        await scheduler.tick()
        assert leader.acquires == 2

    async def test_an_idle_round_touches_no_store_but_the_renewal(self, parity: ParityEnv) -> None:
        """Rule: between occurrences a leading scheduler reads nothing: watermarks stay in memory."""
        assert parity.backend.leader is not None
        assert parity.backend.scheduler is not None
        leader = CountingLeader(parity.backend.leader)
        state = CountingState(parity.backend.scheduler)
        counted = replace(parity.backend, scheduler=state)
        app = await App(
            counted, tasks=[hourly(cron="0 0 * * *")], clock=parity.clock, retention=None
        ).open()
        scheduler = app.scheduler(leader=leader)
        await scheduler.tick()
        loaded = state.calls  # the first round reads the watermarks and arms the new task
        for _ in range(30):  # five idle minutes, a round every ten seconds
            parity.clock.advance(10_000)
            await scheduler.tick()
        assert state.calls == loaded
        assert leader.acquires == 31
