"""Parity: the operator contract, `JobIntrospection` (semantics.md, "Operator surface")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT, BulkResult
from xjobs.contract.introspection import (
    COUNT_CAP,
    HOUR_MS,
    MAX_ERROR_HISTORY,
    MINUTE_MS,
    JobFilter,
    JobPosition,
    bucket_of,
)
from xjobs.run.settle import (
    ending,
    handing_back,
    interrupting,
    parking,
    refusing,
    retrying,
    shedding,
)
from xjobs.testing import rows

if TYPE_CHECKING:
    from xjobs.contract.introspection import CounterBucket
    from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("introspection")]

LEASE_MS = 1_000


async def _newest_first(parity: ParityEnv, n: int, **overrides: object) -> list[str]:
    """`n` jobs enqueued a millisecond apart; their ids newest first."""
    ids = []
    for _ in range(n):
        parity.clock.advance(1)
        ids.append((await parity.enqueue(**overrides)).id)
    return ids[::-1]


async def _list(parity: ParityEnv, where: JobFilter | None = None, **kw: object) -> list[str]:
    limit = kw.pop("limit", 50)
    after = kw.pop("after", None)
    found = await parity.introspection.list_jobs(
        where or JobFilter(),
        limit=limit,  # type: ignore[arg-type]
        after=after,  # type: ignore[arg-type]
    )
    return [j.id for j in found]


def _counts(buckets: list[CounterBucket]) -> dict[tuple[str, str], int]:
    totals: dict[tuple[str, str], int] = {}
    for b in buckets:
        totals[(b.name, b.outcome)] = totals.get((b.name, b.outcome), 0) + b.count
    return totals


class TestListJobs:
    async def test_lists_newest_first(self, parity: ParityEnv) -> None:
        """Rule: `list()` is newest first by `(created_at, id)`."""
        ids = await _newest_first(parity, 3)
        assert await _list(parity) == ids

    async def test_a_page_holds_at_most_its_limit(self, parity: ParityEnv) -> None:
        """Rule: a page answers at most `limit` jobs, the newest."""
        ids = await _newest_first(parity, 5)
        assert await _list(parity, limit=2) == ids[:2]

    async def test_after_a_position_answers_strictly_older_rows(self, parity: ParityEnv) -> None:
        """Rule: the keyset page after a row starts strictly after it."""
        ids = await _newest_first(parity, 5)
        first = await parity.introspection.list_jobs(JobFilter(), limit=2, after=None)
        rest = await _list(parity, after=first[-1].position)
        assert rest == ids[2:]

    async def test_rows_of_one_millisecond_are_ordered_by_id(self, parity: ParityEnv) -> None:
        """Rule: ties on `created_at` are broken by id, newest (largest) first, and paged exactly."""
        ids = sorted([(await parity.enqueue()).id for _ in range(4)], reverse=True)
        first = await parity.introspection.list_jobs(JobFilter(), limit=2, after=None)
        second = await _list(parity, after=first[-1].position)
        assert [j.id for j in first] + second == ids

    async def test_filters_by_state(self, parity: ParityEnv) -> None:
        """Rule: a state filter lists only jobs in those states."""
        dead = await parity.job_in_state("dead")
        await parity.job_in_state("completed")
        failed = await parity.job_in_state("failed")
        found = await _list(parity, JobFilter(states=("dead", "failed")))
        assert sorted(found) == sorted([dead.id, failed.id])

    async def test_filters_by_queue_name_and_tenant(self, parity: ParityEnv) -> None:
        """Rule: queue, job name and tenant filters each narrow the list."""
        a = await parity.enqueue(queue="alpha", name="send", tenant_id="org-1")
        await parity.enqueue(queue="beta", name="send", tenant_id="org-1")
        await parity.enqueue(queue="alpha", name="other", tenant_id="org-1")
        await parity.enqueue(queue="alpha", name="send", tenant_id="org-2")
        where = JobFilter(queue="alpha", name="send", tenant="org-1")
        assert await _list(parity, where) == [a.id]

    async def test_filters_by_creation_range(self, parity: ParityEnv) -> None:
        """Rule: created_after and created_before bound the list (both exclusive)."""
        ids = await _newest_first(parity, 3)
        middle = (await parity.record(ids[1])).created_at_ms
        after = JobFilter(created_after_ms=middle - 1, created_before_ms=middle + 1)
        assert await _list(parity, after) == [ids[1]]

    async def test_a_summary_carries_what_a_list_shows(self, parity: ParityEnv) -> None:
        """Rule: a listed job shows its state, attempts, times and last error (no payload)."""
        job = await parity.job_in_state("dead", name="send", queue="mail")
        (summary,) = await parity.introspection.list_jobs(JobFilter(), limit=5, after=None)
        record = await parity.record(job.id)
        assert (summary.id, summary.name, summary.queue, summary.state) == (
            job.id,
            "send",
            "mail",
            "dead",
        )
        assert (summary.attempt, summary.max_attempts, summary.last_error) == (
            1,
            record.max_attempts,
            "dead-lettered",
        )
        assert summary.position == JobPosition(record.created_at_ms, job.id)

    async def test_an_empty_backend_lists_nothing(self, parity: ParityEnv) -> None:
        """Rule: a list of nothing is an empty page."""
        assert await _list(parity) == []


class TestAttemptErrors:
    async def test_a_retry_with_an_error_records_the_attempt(self, parity: ParityEnv) -> None:
        """Rule: every attempt's error survives (not only `last_error`), with its worker and time."""
        job = await parity.enqueue()
        first = await parity.claim_one(worker_id="worker-a")
        now = parity.clock.now_ms()
        await parity.backend.jobs.nack(first.claim, retrying("ValueError: first\nframes", now))
        second = await parity.claim_one(worker_id="worker-b")
        await parity.backend.jobs.nack(second.claim, ending(True, "KeyError: second"))
        errors = await parity.introspection.errors(job.id)
        assert [(e.attempt, e.worker_id, e.text) for e in errors] == [
            (1, "worker-a", "ValueError: first\nframes"),
            (2, "worker-b", "KeyError: second"),
        ]
        assert (errors[0].error_class, errors[0].message, errors[0].traceback) == (
            "ValueError",
            "first",
            "frames",
        )

    async def test_a_settle_without_an_error_records_none(self, parity: ParityEnv) -> None:
        """Rule: a shed, a hand-back or a park writes no attempt error."""
        job = await parity.enqueue()
        for nack in (shedding, handing_back, parking):
            claimed = await parity.claim_one()
            await parity.backend.jobs.nack(claimed.claim, nack(parity.clock.now_ms()))
            parity.clock.advance(1)
        assert await parity.introspection.errors(job.id) == []

    async def test_at_most_the_history_bound_is_kept(self, parity: ParityEnv) -> None:
        """Rule: past MAX_ERROR_HISTORY, the oldest attempt errors go."""
        job = await parity.enqueue(max_attempts=MAX_ERROR_HISTORY + 10)
        for n in range(MAX_ERROR_HISTORY + 2):
            claimed = await parity.claim_one()
            await parity.backend.jobs.nack(
                claimed.claim, retrying(f"E: {n}", parity.clock.now_ms())
            )
        errors = await parity.introspection.errors(job.id)
        assert [e.text for e in errors] == [f"E: {n}" for n in range(2, MAX_ERROR_HISTORY + 2)]

    async def test_a_burial_records_the_lapse(self, parity: ParityEnv) -> None:
        """Rule: a lease lapsed on the final attempt is recorded as that attempt's error."""
        job = await parity.enqueue(max_attempts=1)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim(worker_id="worker-b")
        (error,) = await parity.introspection.errors(job.id)
        assert (error.attempt, error.text) == (1, LAPSED_ON_FINAL_ATTEMPT)

    async def test_a_job_never_failed_has_no_errors(self, parity: ParityEnv) -> None:
        """Rule: errors of an unknown or clean job are an empty list."""
        job = await parity.job_in_state("completed")
        assert await parity.introspection.errors(job.id) == []
        assert await parity.introspection.errors(parity.new_job().id) == []


class TestQueues:
    async def test_counts_each_state_of_a_queue(self, parity: ParityEnv) -> None:
        """Rule: a queue's counts split ready (due) from scheduled (future run_at)."""
        for state in ("running", "waiting", "dead", "failed"):
            await parity.job_in_state(state, queue="q1")
        await parity.enqueue(queue="q1")
        await parity.enqueue(queue="q1", run_at_ms=parity.clock.now_ms() + HOUR_MS)
        (q1,) = await parity.introspection.queues(parity.clock.now_ms())
        assert (q1.queue, q1.ready, q1.scheduled, q1.running, q1.waiting, q1.dead, q1.failed) == (
            "q1",
            1,
            1,
            1,
            1,
            1,
            1,
        )

    async def test_the_oldest_ready_is_the_longest_due(self, parity: ParityEnv) -> None:
        """Rule: `oldest_ready_ms` is the run_at of the longest-due ready job."""
        start = parity.clock.now_ms()
        await parity.enqueue(queue="q1")
        parity.clock.advance(500)
        await parity.enqueue(queue="q1")
        (q1,) = await parity.introspection.queues(parity.clock.now_ms())
        assert q1.oldest_ready_ms == start

    async def test_no_due_job_has_no_oldest(self, parity: ParityEnv) -> None:
        """Rule: a queue with nothing due has no oldest ready job."""
        await parity.enqueue(queue="q1", run_at_ms=parity.clock.now_ms() + HOUR_MS)
        (q1,) = await parity.introspection.queues(parity.clock.now_ms())
        assert (q1.ready, q1.oldest_ready_ms) == (0, None)

    async def test_lists_every_queue_by_name_with_its_pause(self, parity: ParityEnv) -> None:
        """Rule: every queue with jobs or a pause is listed, sorted, with its paused flag."""
        await parity.enqueue(queue="zeta")
        await parity.enqueue(queue="alpha")
        await parity.introspection.pause("queue", "mid")
        found = await parity.introspection.queues(parity.clock.now_ms())
        assert [(q.queue, q.paused) for q in found] == [
            ("alpha", False),
            ("mid", True),
            ("zeta", False),
        ]

    async def test_counts_are_bounded_by_the_cap(self, parity: ParityEnv) -> None:
        """Rule: a count is a bounded scan: it never exceeds COUNT_CAP."""
        await parity.backend.jobs.enqueue([parity.new_job(queue="q1") for _ in range(10)])
        (q1,) = await parity.introspection.queues(parity.clock.now_ms())
        assert q1.ready == min(10, COUNT_CAP)


class TestCounters:
    async def test_each_ending_moves_its_minute_counter(self, parity: ParityEnv) -> None:
        """Rule: counters move in the settling statement: completed, retried, dead-lettered,
        dropped, refused, cancelled — one per ending, by job name."""
        now = parity.clock.now_ms()
        await parity.job_in_state("completed", name="a")
        await parity.job_in_state("dead", name="a")
        await parity.job_in_state("failed", name="b")
        await parity.job_in_state("cancelled", name="b")
        await parity.enqueue(name="c")
        claimed = await parity.claim_one()
        await parity.backend.jobs.nack(claimed.claim, retrying("E: x", now))
        again = await parity.claim_one()
        await parity.backend.jobs.nack(again.claim, refusing("refused: busy"))
        buckets = await parity.introspection.counters("minute", bucket_of(now))
        assert _counts(buckets) == {
            ("a", "completed"): 1,
            ("a", "dead-lettered"): 1,
            ("b", "dropped"): 1,
            ("b", "cancelled"): 1,
            ("c", "retried"): 1,
            ("c", "refused"): 1,
        }
        assert {b.bucket_ms for b in buckets} == {bucket_of(now)}

    async def test_a_shed_a_park_a_hand_back_and_a_drain_count_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a shed, a suspension, a hand-back and an interruption add nothing."""
        await parity.enqueue()
        now = parity.clock.now_ms()
        for nack in (shedding(now), parking(now), handing_back(now), interrupting("E: x", now)):
            claimed = await parity.claim_one()
            await parity.backend.jobs.nack(claimed.claim, nack)
        assert await parity.introspection.counters("minute", 0) == []

    async def test_a_burial_counts_as_its_ending(self, parity: ParityEnv) -> None:
        """Rule: the claim that buries a lapsed final attempt moves the counter."""
        await parity.enqueue(max_attempts=1, name="x")
        await parity.enqueue(max_attempts=1, name="y", dead_letter=False)
        await parity.claim(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim(worker_id="worker-b")
        counts = _counts(await parity.introspection.counters("minute", 0))
        assert counts == {("x", "dead-lettered"): 1, ("y", "dropped"): 1}

    async def test_a_failed_fence_counts_nothing(self, parity: ParityEnv) -> None:
        """Rule: a settle that missed its fence moved nothing, its counter included."""
        await parity.enqueue()
        claimed = await parity.claim_one()
        await parity.backend.jobs.ack(claimed.claim)
        await parity.backend.jobs.ack(claimed.claim)
        counts = _counts(await parity.introspection.counters("minute", 0))
        assert counts == {("parity_job", "completed"): 1}

    async def test_endings_in_two_minutes_are_two_buckets(self, parity: ParityEnv) -> None:
        """Rule: counters are one-minute buckets."""
        await parity.job_in_state("completed")
        parity.clock.advance(MINUTE_MS)
        await parity.job_in_state("completed")
        buckets = await parity.introspection.counters("minute", 0)
        assert [b.count for b in buckets] == [1, 1]
        assert buckets[1].bucket_ms - buckets[0].bucket_ms == MINUTE_MS

    async def test_a_rollup_folds_closed_minutes_into_hour_and_day_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the leader folds minute buckets into hour and day tiers at most once a bucket;
        the current minute is not closed yet."""
        await parity.job_in_state("completed")
        parity.clock.advance(MINUTE_MS)
        await parity.job_in_state("completed")
        now = parity.clock.now_ms()
        first = await parity.introspection.rollup_counters(now)
        second = await parity.introspection.rollup_counters(now)
        hours = _counts(await parity.introspection.counters("hour", 0))
        days = _counts(await parity.introspection.counters("day", 0))
        assert (first, second) == (1, 0)
        assert hours == days == {("parity_job", "completed"): 1}
        parity.clock.advance(MINUTE_MS)
        assert await parity.introspection.rollup_counters(parity.clock.now_ms()) == 1
        assert _counts(await parity.introspection.counters("hour", 0)) == {
            ("parity_job", "completed"): 2
        }


class TestPauses:
    async def test_a_paused_queue_claims_nothing_until_resumed(self, parity: ParityEnv) -> None:
        """Rule: a pause is a row the claim reads: a paused queue's jobs are not claimed."""
        job = await parity.enqueue()
        assert await parity.introspection.pause("queue", "parity") is True
        assert (await parity.claim()).jobs == ()
        assert await parity.introspection.resume("queue", "parity") is True
        assert [j.id for j in (await parity.claim()).jobs] == [job.id]

    async def test_a_paused_job_name_is_skipped_in_every_queue(self, parity: ParityEnv) -> None:
        """Rule: pausing a job name holds its jobs in every queue; other names still run."""
        await parity.enqueue(name="held", queue="q1")
        await parity.enqueue(name="held", queue="q2")
        other = await parity.enqueue(name="free", queue="q1")
        await parity.introspection.pause("job", "held")
        result = await parity.claim({"q1": 10, "q2": 10})
        assert [j.id for j in result.jobs] == [other.id]

    async def test_a_resumed_job_name_runs_in_its_order(self, parity: ParityEnv) -> None:
        """Rule: a paused job keeps its place: resumed, it is claimed in claim order."""
        first = await parity.enqueue(name="held")
        parity.clock.advance(1)
        second = await parity.enqueue(name="free")
        await parity.introspection.pause("job", "held")
        passed_over = await parity.claim({"parity": 10})
        await parity.introspection.resume("job", "held")
        await parity.backend.jobs.enqueue([parity.new_job(name="free")])
        result = await parity.claim({"parity": 1})
        assert [j.id for j in passed_over.jobs] == [second.id]
        assert [j.id for j in result.jobs] == [first.id]

    async def test_pausing_twice_and_resuming_twice_answer_what_changed(
        self, parity: ParityEnv
    ) -> None:
        """Rule: pause answers whether it was running; resume whether it was paused."""
        ops = parity.introspection
        answers = [
            await ops.pause("queue", "q1"),
            await ops.pause("queue", "q1"),
            await ops.resume("queue", "q1"),
            await ops.resume("queue", "q1"),
        ]
        assert answers == [True, False, True, False]

    async def test_pauses_are_listed_by_kind_and_name(self, parity: ParityEnv) -> None:
        """Rule: every pause row is listed, with when it was written."""
        now = parity.clock.now_ms()
        await parity.introspection.pause("queue", "q2")
        await parity.introspection.pause("job", "send")
        await parity.introspection.pause("queue", "q1")
        found = await parity.introspection.pauses()
        assert [(p.kind, p.name) for p in found] == [
            ("job", "send"),
            ("queue", "q1"),
            ("queue", "q2"),
        ]
        assert {p.paused_at_ms for p in found} == {now}

    async def test_a_pause_touches_nothing_already_running(self, parity: ParityEnv) -> None:
        """Rule: nothing already running is touched by a pause: its settle lands."""
        await parity.enqueue()
        claimed = await parity.claim_one()
        await parity.introspection.pause("queue", "parity")
        assert await parity.backend.jobs.ack(claimed.claim) is True


class TestPromoteAndRemove:
    async def test_promote_makes_a_delayed_job_due_now(self, parity: ParityEnv) -> None:
        """Rule: promote runs a delayed (or retrying) job now."""
        job = await parity.enqueue(run_at_ms=parity.clock.now_ms() + HOUR_MS)
        move = await parity.introspection.promote(job.id)
        assert (move.status, move.record and move.record.run_at_ms) == (
            "done",
            parity.clock.now_ms(),
        )
        assert (await parity.claim_one()).id == job.id

    @pytest.mark.parametrize(("state", "status"), [("running", "live"), ("dead", "finished")])
    async def test_promote_refuses_a_job_that_is_not_ready(
        self, parity: ParityEnv, state: str, status: str
    ) -> None:
        """Rule: only a ready job can be promoted; the answer names the state."""
        job = await parity.job_in_state(state)  # type: ignore[arg-type]
        move = await parity.introspection.promote(job.id)
        assert (move.status, move.state) == (status, state)

    async def test_remove_deletes_a_finished_job_with_its_steps(self, parity: ParityEnv) -> None:
        """Rule: remove deletes a finished job and its steps and errors."""
        job = await parity.enqueue()
        claimed = await parity.claim_one()
        if parity.backend.steps is not None:
            await parity.backend.steps.put(claimed.claim, rows.step_record(claimed))
        await parity.backend.jobs.nack(claimed.claim, ending(True, "E: gone"))
        move = await parity.introspection.remove(job.id)
        assert (move.status, move.record and move.record.state) == ("done", "dead")
        assert await parity.backend.jobs.get(job.id) is None
        assert await parity.introspection.errors(job.id) == []
        if parity.backend.steps is not None:
            assert await parity.backend.steps.list(claimed.run_id, claimed.queue) == []

    async def test_remove_refuses_a_live_job(self, parity: ParityEnv) -> None:
        """Rule: a live job is not removed (cancel it first)."""
        job = await parity.job_in_state("running")
        move = await parity.introspection.remove(job.id)
        assert (move.status, move.state) == ("live", "running")
        assert (await parity.record(job.id)).state == "running"

    async def test_a_missing_job_is_missing(self, parity: ParityEnv) -> None:
        """Rule: promote and remove of an unknown id answer `missing`."""
        unknown = parity.new_job().id
        assert (await parity.introspection.promote(unknown)).status == "missing"
        assert (await parity.introspection.remove(unknown)).status == "missing"


class TestBulkVerbs:
    async def test_cancel_many_cancels_live_jobs_in_batches(self, parity: ParityEnv) -> None:
        """Rule: a bulk move answers (moved, remaining); remaining is what a second call moves."""
        done = await parity.job_in_state("completed")
        for _ in range(3):
            await parity.enqueue()
        first = await parity.introspection.cancel_many(JobFilter(), 2, "operator")
        second = await parity.introspection.cancel_many(JobFilter(), 2, "operator")
        assert (first, second) == (BulkResult(2, 1), BulkResult(1, 0))
        assert (await parity.record(done.id)).state == "completed"

    async def test_promote_many_moves_only_future_ready_jobs(self, parity: ParityEnv) -> None:
        """Rule: a bulk promote moves delayed ready jobs only."""
        later = parity.clock.now_ms() + HOUR_MS
        delayed = [await parity.enqueue(run_at_ms=later) for _ in range(2)]
        await parity.enqueue()
        result = await parity.introspection.promote_many(JobFilter(), 10)
        records = [await parity.record(j.id) for j in delayed]
        assert result == BulkResult(2, 0)
        assert {r.run_at_ms for r in records} == {parity.clock.now_ms()}

    async def test_remove_many_removes_finished_jobs_only(self, parity: ParityEnv) -> None:
        """Rule: a bulk remove deletes finished jobs matching the filter, and no live one."""
        dead = [await parity.job_in_state("dead") for _ in range(2)]
        live = await parity.enqueue()
        result = await parity.introspection.remove_many(JobFilter(states=("dead",)), 10)
        assert result == BulkResult(2, 0)
        assert [await parity.backend.jobs.get(j.id) for j in dead] == [None, None]
        assert (await parity.record(live.id)).state == "ready"

    async def test_a_filter_narrows_a_bulk_verb(self, parity: ParityEnv) -> None:
        """Rule: a bulk verb moves only what its filter names."""
        a = await parity.enqueue(queue="alpha")
        b = await parity.enqueue(queue="beta")
        result = await parity.introspection.cancel_many(JobFilter(queue="alpha"), 10, None)
        states = [(await parity.record(j.id)).state for j in (a, b)]
        assert (result, states) == (BulkResult(1, 0), ["cancelled", "ready"])
