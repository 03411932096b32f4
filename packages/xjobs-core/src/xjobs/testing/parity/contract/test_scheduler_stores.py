"""Parity: the scheduler's stores, watermarks, fires, pauses and leadership (stores.py, "SchedulerState",
"LeaderElection"; semantics.md, "The scheduler")."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from xjobs.contract.stores import LeaderElection, SchedulerState, TaskFire

if TYPE_CHECKING:
    from xjobs.contract.driver import NewJob
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

TASK = "nightly-report"
OTHER_TASK = "hourly-sync"
MINUTE_MS = 60_000
TTL_MS = 10_000
LEADER, OTHER = "scheduler-a", "scheduler-b"


def _scheduler(parity: ParityEnv) -> SchedulerState:
    scheduler = parity.backend.scheduler
    assert scheduler is not None, 'mark the scenario @pytest.mark.requires("scheduler")'
    return scheduler


def _leader(parity: ParityEnv) -> LeaderElection:
    leader = parity.backend.leader
    assert leader is not None, 'mark the scenario @pytest.mark.requires("leader")'
    return leader


def _occurrence(parity: ParityEnv, minutes: int) -> int:
    """An occurrence `minutes` after the scenario's start (negative: before it)."""
    start = parity.clock.now_ms() // MINUTE_MS * MINUTE_MS
    return start + minutes * MINUTE_MS


def _job(parity: ParityEnv, **overrides: Any) -> NewJob:
    """A fresh row for a fire (its own id and idempotency key unless overridden)."""
    return parity.new_job(name="parity_task_job", **overrides)


async def _watermark(parity: ParityEnv, task: str = TASK) -> int | None:
    return (await _scheduler(parity).watermarks([task])).get(task)


async def _exists(parity: ParityEnv, job: NewJob) -> bool:
    return await parity.backend.jobs.get(job.id) is not None


async def _fired(parity: ParityEnv, task: str, occurrence_ms: int) -> tuple[NewJob, TaskFire]:
    """Fire `task` from its current watermark at `occurrence_ms`; answers the job and the expected fire."""
    job = _job(parity)
    previous = await _watermark(parity, task)
    assert await _scheduler(parity).fire(task, previous, occurrence_ms, job), "the fire missed"
    return job, TaskFire(task, occurrence_ms, job.id, parity.clock.now_ms())


@pytest.mark.requires("scheduler")
class TestWatermarks:
    async def test_a_task_never_armed_has_no_watermark(self, parity: ParityEnv) -> None:
        """Rule: `watermarks` answers only the tasks that have one; a task never armed is absent."""
        assert await _scheduler(parity).watermarks([TASK, OTHER_TASK]) == {}

    async def test_arm_from_none_creates_the_watermark(self, parity: ParityEnv) -> None:
        """Rule: `arm` from `None` (no row yet) sets the watermark and answers True."""
        at = _occurrence(parity, 0)
        armed = await _scheduler(parity).arm(TASK, None, at)
        assert (armed, await _scheduler(parity).watermarks([TASK])) == (True, {TASK: at})

    async def test_a_second_arm_from_none_is_refused(self, parity: ParityEnv) -> None:
        """Rule: `None` means no row; once armed, another arm from `None` answers False and leaves the watermark."""
        first, second = _occurrence(parity, 0), _occurrence(parity, 5)
        assert await _scheduler(parity).arm(TASK, None, first)
        refused = await _scheduler(parity).arm(TASK, None, second)
        assert (refused, await _watermark(parity)) == (False, first)

    async def test_arm_from_the_current_watermark_moves_it(self, parity: ParityEnv) -> None:
        """Rule: `arm` is a compare-and-set: from the value it read, it moves the watermark."""
        first, second = _occurrence(parity, 0), _occurrence(parity, 5)
        assert await _scheduler(parity).arm(TASK, None, first)
        moved = await _scheduler(parity).arm(TASK, first, second)
        assert (moved, await _watermark(parity)) == (True, second)

    async def test_arm_from_a_stale_previous_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a watermark that is not `previous_ms` any more is left alone; the arm answers False."""
        first, second, third = (_occurrence(parity, m) for m in (0, 5, 10))
        assert await _scheduler(parity).arm(TASK, None, first)
        assert await _scheduler(parity).arm(TASK, first, second)
        refused = await _scheduler(parity).arm(TASK, first, third)
        assert (refused, await _watermark(parity)) == (False, second)

    async def test_arm_from_a_value_on_a_task_without_a_row_is_refused(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a task with no row has no watermark to match; an arm from a value answers False and creates nothing."""
        refused = await _scheduler(parity).arm(TASK, _occurrence(parity, 0), _occurrence(parity, 5))
        assert (refused, await _scheduler(parity).watermarks([TASK])) == (False, {})

    async def test_watermarks_answers_many_tasks_in_one_call(self, parity: ParityEnv) -> None:
        """Rule: `watermarks` answers each named task that has one, and only the named ones."""
        marks = {f"task-{i}": _occurrence(parity, i) for i in range(4)}
        for task, at in marks.items():
            assert await _scheduler(parity).arm(task, None, at)
        asked = ["task-0", "task-2", "task-3", "never-armed"]
        answered = await _scheduler(parity).watermarks(asked)
        empty = await _scheduler(parity).watermarks([])
        assert (answered, empty) == ({t: marks[t] for t in asked[:3]}, {})

    async def test_watermarks_are_kept_per_task(self, parity: ParityEnv) -> None:
        """Rule: each task has its own watermark; moving one leaves another alone."""
        first, second = _occurrence(parity, 0), _occurrence(parity, 5)
        assert await _scheduler(parity).arm(TASK, None, first)
        assert await _scheduler(parity).arm(OTHER_TASK, None, first)
        assert await _scheduler(parity).arm(TASK, first, second)
        marks = await _scheduler(parity).watermarks([TASK, OTHER_TASK])
        assert marks == {TASK: second, OTHER_TASK: first}


@pytest.mark.requires("scheduler")
class TestFire:
    async def test_a_fire_moves_the_watermark_enqueues_and_records_the_fire(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a fire from the watermark it read moves it to the occurrence, enqueues the job (a
        `ready` row) and records the task's fire (occurrence, job id, fired at now)."""
        armed, occurrence = _occurrence(parity, -1), _occurrence(parity, 0)
        assert await _scheduler(parity).arm(TASK, None, armed)
        now = parity.clock.advance(1_234)
        job = _job(parity)
        fired = await _scheduler(parity).fire(TASK, armed, occurrence, job)
        record = await parity.record(job.id)
        assert (fired, await _watermark(parity)) == (True, occurrence)
        assert (record.state, record.name, record.queue, record.idempotency_key) == (
            "ready",
            job.name,
            job.queue,
            job.idempotency_key,
        )
        assert await _scheduler(parity).task_fires([TASK]) == {
            TASK: TaskFire(TASK, occurrence, job.id, now)
        }

    async def test_a_fired_job_is_claimable(self, parity: ParityEnv) -> None:
        """Rule: the job a fire enqueues is a job like any other: a worker claims it."""
        job, _ = await _fired(parity, TASK, _occurrence(parity, 0))
        claimed = await parity.claim_one(job.queue)
        assert (claimed.id, claimed.run_id, claimed.payload) == (job.id, job.run_id, job.payload)

    async def test_a_fire_from_none_on_a_fresh_task_works(self, parity: ParityEnv) -> None:
        """Rule: `None` is "no row yet": the first fire of a task never armed creates its watermark."""
        occurrence, job = _occurrence(parity, 0), _job(parity)
        fired = await _scheduler(parity).fire(TASK, None, occurrence, job)
        state = (await parity.record(job.id)).state
        assert (fired, await _watermark(parity), state) == (True, occurrence, "ready")
        assert (await _scheduler(parity).task_fires([TASK]))[TASK].job_id == job.id

    async def test_a_fire_from_a_stale_previous_is_refused(self, parity: ParityEnv) -> None:
        """Rule: only if the watermark moved is the job enqueued and the fire recorded: a fire from
        a stale previous answers False, enqueues nothing and leaves the watermark and the last fire."""
        first, second = _occurrence(parity, 0), _occurrence(parity, 1)
        _, recorded = await _fired(parity, TASK, first)
        parity.clock.advance(MINUTE_MS)
        stale = [_job(parity), _job(parity), _job(parity)]
        answers = [
            await _scheduler(parity).fire(TASK, None, second, stale[0]),
            await _scheduler(parity).fire(TASK, first - MINUTE_MS, second, stale[1]),
            await _scheduler(parity).fire(TASK, second, second + MINUTE_MS, stale[2]),
        ]
        assert answers == [False, False, False]
        assert [await _exists(parity, j) for j in stale] == [False, False, False]
        assert await _watermark(parity) == first
        assert await _scheduler(parity).task_fires() == {TASK: recorded}

    async def test_a_fire_from_a_value_on_a_task_without_a_row_is_refused(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a task with no row has no watermark to match; a fire from a value answers False and enqueues nothing."""
        job = _job(parity)
        fired = await _scheduler(parity).fire(
            TASK, _occurrence(parity, -1), _occurrence(parity, 0), job
        )
        assert (fired, await _exists(parity, job)) == (False, False)
        assert await _scheduler(parity).watermarks([TASK]) == {}
        assert await _scheduler(parity).task_fires() == {}

    @pytest.mark.parametrize("armed", [False, True], ids=["fresh-task", "armed-task"])
    async def test_concurrent_fires_from_the_same_previous_move_it_once(
        self, parity: ParityEnv, armed: bool
    ) -> None:
        """Rule: two schedulers racing one occurrence move the watermark once: of concurrent fires
        from the same previous, exactly one answers True and exactly its job is enqueued."""
        previous = _occurrence(parity, -1) if armed else None
        if previous is not None:
            assert await _scheduler(parity).arm(TASK, None, previous)
        occurrence = _occurrence(parity, 0)
        jobs = [_job(parity) for _ in range(4)]
        answers = await asyncio.gather(
            *(_scheduler(parity).fire(TASK, previous, occurrence, j) for j in jobs)
        )
        exists = [await _exists(parity, j) for j in jobs]
        assert (sorted(answers), exists) == ([False, False, False, True], list(answers))
        winner = jobs[answers.index(True)]
        assert await _watermark(parity) == occurrence
        assert (await _scheduler(parity).task_fires([TASK]))[TASK].job_id == winner.id

    async def test_concurrent_fires_of_different_occurrences_move_it_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the watermark only moves through a compare-and-set from the value read: racing fires
        of different occurrences from one previous move it once, to the winner's occurrence."""
        previous = _occurrence(parity, -1)
        assert await _scheduler(parity).arm(TASK, None, previous)
        occurrences = [_occurrence(parity, m) for m in (0, 1, 2)]
        jobs = [_job(parity) for _ in occurrences]
        answers = await asyncio.gather(
            *(
                _scheduler(parity).fire(TASK, previous, at, j)
                for at, j in zip(occurrences, jobs, strict=True)
            )
        )
        assert sorted(answers) == [False, False, True]
        won = answers.index(True)
        assert [await _exists(parity, j) for j in jobs] == list(answers)
        assert await _watermark(parity) == occurrences[won]
        fires = await _scheduler(parity).task_fires([TASK])
        assert (fires[TASK].occurrence_ms, fires[TASK].job_id) == (occurrences[won], jobs[won].id)

    async def test_a_fire_deduped_by_a_live_job_still_moves_and_records_it(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the fire's enqueue is deduped on the idempotency key like any enqueue: with a live
        job of the same name and key no second row is written, the watermark still moves, and the
        fire records the live job's id."""
        live = await parity.enqueue(name="parity_task_job", idempotency_key=f"{TASK}:k")
        before = await parity.record(live.id)
        occurrence, now = _occurrence(parity, 0), parity.clock.advance(500)
        job = _job(parity, idempotency_key=live.idempotency_key)
        fired = await _scheduler(parity).fire(TASK, None, occurrence, job)
        assert (fired, await _watermark(parity), await _exists(parity, job)) == (
            True,
            occurrence,
            False,
        )
        assert await _scheduler(parity).task_fires([TASK]) == {
            TASK: TaskFire(TASK, occurrence, live.id, now)
        }
        assert await parity.record(live.id) == before

    async def test_a_finished_job_with_the_same_key_does_not_dedupe_the_fire(
        self, parity: ParityEnv
    ) -> None:
        """Rule: like any enqueue, only a LIVE job holds the key: after it finished, a fire with its
        key enqueues a new row and records it."""
        done = await parity.job_in_state("completed", name="parity_task_job", idempotency_key="k")
        job = _job(parity, idempotency_key=done.idempotency_key)
        assert await _scheduler(parity).fire(TASK, None, _occurrence(parity, 0), job)
        assert (await parity.record(job.id)).state == "ready"
        assert (await _scheduler(parity).task_fires([TASK]))[TASK].job_id == job.id

    async def test_the_last_fire_is_the_latest_dispatch(self, parity: ParityEnv) -> None:
        """Rule: `task_fires` answers each task's LAST fire; a later fire replaces the earlier one."""
        first, _ = await _fired(parity, TASK, _occurrence(parity, 0))
        parity.clock.advance(MINUTE_MS)
        second, latest = await _fired(parity, TASK, _occurrence(parity, 1))
        assert await _scheduler(parity).task_fires([TASK]) == {TASK: latest}
        assert [await _exists(parity, j) for j in (first, second)] == [True, True]


@pytest.mark.requires("scheduler")
class TestTaskFires:
    async def test_arming_never_writes_a_fire(self, parity: ParityEnv) -> None:
        """Rule: arming writes no task fire: a task only ever armed is in no `task_fires` answer."""
        first, second = _occurrence(parity, 0), _occurrence(parity, 5)
        assert await _scheduler(parity).arm(TASK, None, first)
        assert await _scheduler(parity).arm(TASK, first, second)
        everything = await _scheduler(parity).task_fires()
        named = await _scheduler(parity).task_fires([TASK])
        assert (everything, named) == ({}, {})

    async def test_the_last_fire_is_the_dispatch_not_the_watermark(self, parity: ParityEnv) -> None:
        """Rule: `task_fires` is the last occurrence that DISPATCHED, never the watermark: an arm past
        a fire (a skip) moves the watermark and leaves the fire as it was."""
        fired_at = _occurrence(parity, 0)
        _, recorded = await _fired(parity, TASK, fired_at)
        parity.clock.advance(10 * MINUTE_MS)
        skipped_to = _occurrence(parity, 0)
        assert await _scheduler(parity).arm(TASK, fired_at, skipped_to)
        assert await _watermark(parity) == skipped_to
        assert await _scheduler(parity).task_fires([TASK]) == {TASK: recorded}

    async def test_task_fires_of_none_lists_every_task_that_dispatched(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `task_fires(None)` answers the last fire of every task that ever dispatched."""
        recorded = {}
        for minutes, task in enumerate(("task-a", "task-b", "task-c")):
            _, recorded[task] = await _fired(parity, task, _occurrence(parity, minutes))
            parity.clock.advance(1_000)
        assert await _scheduler(parity).arm("armed-only", None, _occurrence(parity, 0))
        assert await _scheduler(parity).task_fires(None) == recorded
        assert await _scheduler(parity).task_fires() == recorded

    async def test_task_fires_of_names_filters(self, parity: ParityEnv) -> None:
        """Rule: `task_fires(names)` answers only the named tasks that dispatched."""
        recorded = {}
        for minutes, task in enumerate(("task-a", "task-b", "task-c")):
            _, recorded[task] = await _fired(parity, task, _occurrence(parity, minutes))
        answered = await _scheduler(parity).task_fires(["task-a", "task-c", "never-fired"])
        empty = await _scheduler(parity).task_fires([])
        assert (answered, empty) == ({t: recorded[t] for t in ("task-a", "task-c")}, {})


@pytest.mark.requires("scheduler")
class TestPause:
    async def test_no_task_is_paused_at_first(self, parity: ParityEnv) -> None:
        """Rule: `paused` answers which of the named tasks are paused; none has been."""
        assert await _scheduler(parity).paused([TASK, OTHER_TASK]) == set()

    async def test_pause_answers_whether_the_task_was_running(self, parity: ParityEnv) -> None:
        """Rule: `pause` answers whether the task was running before: True the first time, False
        for a task already paused; either way it is paused."""
        assert await _scheduler(parity).arm(TASK, None, _occurrence(parity, 0))
        first = await _scheduler(parity).pause(TASK)
        again = await _scheduler(parity).pause(TASK)
        assert (first, again, await _scheduler(parity).paused([TASK])) == (True, False, {TASK})

    async def test_resume_answers_whether_the_task_was_paused(self, parity: ParityEnv) -> None:
        """Rule: `resume` answers whether the task was paused: True once, then False; it runs again."""
        assert await _scheduler(parity).pause(TASK)
        first = await _scheduler(parity).resume(TASK)
        again = await _scheduler(parity).resume(TASK)
        assert (first, again, await _scheduler(parity).paused([TASK])) == (True, False, set())

    async def test_resume_of_a_task_never_paused_answers_false(self, parity: ParityEnv) -> None:
        """Rule: a task never paused was not paused: `resume` answers False and pauses nothing."""
        resumed = await _scheduler(parity).resume(TASK)
        assert (resumed, await _scheduler(parity).paused([TASK])) == (False, set())

    async def test_a_task_can_be_paused_before_it_is_armed(self, parity: ParityEnv) -> None:
        """Rule: a pause is its own row: a task with no watermark yet is paused (it was running) and
        gets no watermark from it."""
        paused = await _scheduler(parity).pause(TASK)
        assert (paused, await _scheduler(parity).paused([TASK])) == (True, {TASK})
        assert await _scheduler(parity).watermarks([TASK]) == {}

    async def test_paused_answers_many_tasks_in_one_call(self, parity: ParityEnv) -> None:
        """Rule: pauses are per task; `paused` answers the paused ones among the named."""
        for task in ("task-a", "task-c"):
            assert await _scheduler(parity).pause(task)
        answered = await _scheduler(parity).paused(["task-a", "task-b", "task-c", "task-d"])
        assert (answered, await _scheduler(parity).paused([])) == ({"task-a", "task-c"}, set())

    async def test_pausing_and_resuming_keep_the_watermark(self, parity: ParityEnv) -> None:
        """Rule: a paused task keeps its watermark (and its last fire), through the pause and the resume."""
        occurrence = _occurrence(parity, 0)
        _, recorded = await _fired(parity, TASK, occurrence)
        assert await _scheduler(parity).pause(TASK)
        while_paused = await _watermark(parity)
        assert await _scheduler(parity).resume(TASK)
        assert (while_paused, await _watermark(parity)) == (occurrence, occurrence)
        assert await _scheduler(parity).task_fires([TASK]) == {TASK: recorded}


@pytest.mark.requires("leader")
class TestLeaderElection:
    async def test_the_first_candidate_leads(self, parity: ParityEnv) -> None:
        """Rule: with no holder, `acquire` takes leadership and answers True."""
        assert await _leader(parity).acquire(LEADER, TTL_MS) is True

    async def test_another_candidate_is_refused_while_the_ttl_is_live(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a live other holder is not replaced: another candidate's acquire answers False."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        at_once = await _leader(parity).acquire(OTHER, TTL_MS)
        parity.clock.advance(TTL_MS - 1)
        just_before = await _leader(parity).acquire(OTHER, TTL_MS)
        assert (at_once, just_before) == (False, False)

    async def test_the_holder_renews_and_the_expiry_extends(self, parity: ParityEnv) -> None:
        """Rule: `acquire` by the holder renews for `ttl_ms`: past the first TTL, within the renewed
        one, another candidate is still refused."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS // 2)
        renewed = await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS // 2 + 1)  # past the first TTL, within the renewed one
        assert (renewed, await _leader(parity).acquire(OTHER, TTL_MS)) == (True, False)

    async def test_a_renewal_lasts_ttl_from_the_renewal(self, parity: ParityEnv) -> None:
        """Rule: a renewal holds leadership for `ttl_ms` from the renewal; after that it lapses."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS // 2)
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        assert await _leader(parity).acquire(OTHER, TTL_MS) is True

    async def test_a_lapsed_holder_is_replaced(self, parity: ParityEnv) -> None:
        """Rule: a lapsed holder is replaced: after its TTL another candidate leads and the old
        holder is refused."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        took_over = await _leader(parity).acquire(OTHER, TTL_MS)
        old = await _leader(parity).acquire(LEADER, TTL_MS)
        assert (took_over, old) == (True, False)

    async def test_a_lapsed_holder_with_no_rival_leads_again(self, parity: ParityEnv) -> None:
        """Rule: `acquire` takes leadership whenever no live other holder has it, the lapsed holder's own included."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        again = await _leader(parity).acquire(LEADER, TTL_MS)
        assert (again, await _leader(parity).acquire(OTHER, TTL_MS)) == (True, False)

    async def test_release_by_a_non_holder_is_a_no_op(self, parity: ParityEnv) -> None:
        """Rule: `release` gives leadership up only if the candidate holds it; another's release changes nothing."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        await _leader(parity).release(OTHER)
        refused = await _leader(parity).acquire(OTHER, TTL_MS)
        assert (refused, await _leader(parity).acquire(LEADER, TTL_MS)) == (False, True)

    async def test_release_with_no_holder_is_quiet(self, parity: ParityEnv) -> None:
        """Rule: `release` with nobody leading is a no-op; a candidate then leads as usual."""
        await _leader(parity).release(LEADER)
        assert await _leader(parity).acquire(OTHER, TTL_MS) is True

    async def test_release_by_the_holder_frees_leadership_at_once(self, parity: ParityEnv) -> None:
        """Rule: the holder's `release` gives leadership up: another candidate leads at once, with
        the released TTL still unspent, and the old holder is then refused."""
        assert await _leader(parity).acquire(LEADER, TTL_MS)
        await _leader(parity).release(LEADER)
        took_over = await _leader(parity).acquire(OTHER, TTL_MS)
        old = await _leader(parity).acquire(LEADER, TTL_MS)
        assert (took_over, old) == (True, False)

    async def test_concurrent_candidates_elect_one_leader(self, parity: ParityEnv) -> None:
        """Rule: at most one candidate holds leadership at any instant: of concurrent acquires on no
        holder, exactly one answers True, and it is the one that keeps leading."""
        candidates = [f"scheduler-{i}" for i in range(4)]
        answers = await asyncio.gather(*(_leader(parity).acquire(c, TTL_MS) for c in candidates))
        assert sorted(answers) == [False, False, False, True]
        winner = candidates[answers.index(True)]
        again = [await _leader(parity).acquire(c, TTL_MS) for c in candidates]
        assert again == list(answers), f"{winner} won, then the leadership moved"
