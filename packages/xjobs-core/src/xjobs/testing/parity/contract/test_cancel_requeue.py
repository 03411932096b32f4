"""Parity: cancel, requeue and requeue_many (semantics.md, "Claims, leases and settlement")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.driver import BulkResult
from xjobs.contract.introspection import RequeueFilter
from xjobs.errors import (
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRequeueableError,
    JobRequeueDuplicateError,
)
from xjobs.run.settle import ending

if TYPE_CHECKING:
    from xjobs.contract.driver import JobState
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = 1_000
LIVE: tuple[JobState, ...] = ("ready", "running", "waiting")
FINISHED: tuple[JobState, ...] = ("completed", "failed", "dead", "cancelled")


class TestCancel:
    @pytest.mark.parametrize("state", LIVE)
    async def test_cancels_a_live_job(self, parity: ParityEnv, state: JobState) -> None:
        """Rule: `cancel` is fenced on LIVE_STATES: a ready, running or waiting job is cancelled."""
        job = await parity.job_in_state(state)
        cancelled = await parity.cancel(job.id, "operator asked")
        assert (cancelled.id, cancelled.state) == (job.id, "cancelled")

    async def test_a_cancel_is_stored(self, parity: ParityEnv) -> None:
        """Rule: a cancelled job is stored `cancelled`, a finished state with its finish time."""
        job = await parity.job_in_state("running")
        now = parity.clock.advance(10)
        await parity.cancel(job.id)
        record = await parity.record(job.id)
        assert (record.state, record.finished_at_ms) == ("cancelled", now)

    @pytest.mark.parametrize("state", FINISHED)
    async def test_refuses_a_finished_job(self, parity: ParityEnv, state: JobState) -> None:
        """Rule: `cancel` of a finished job is `XJOBS_JOB_NOT_CANCELLABLE`."""
        job = await parity.job_in_state(state)
        with pytest.raises(JobNotCancellableError) as refused:
            await parity.cancel(job.id)
        assert refused.value.code == "XJOBS_JOB_NOT_CANCELLABLE"

    async def test_a_refused_cancel_leaves_the_job_as_it_was(self, parity: ParityEnv) -> None:
        """Rule: a refused cancel moves nothing."""
        job = await parity.job_in_state("completed")
        before = await parity.record(job.id)
        with pytest.raises(JobNotCancellableError):
            await parity.cancel(job.id)
        assert await parity.record(job.id) == before

    async def test_refuses_a_missing_job(self, parity: ParityEnv) -> None:
        """Rule: `cancel` of an unknown id is `XJOBS_JOB_NOT_FOUND`."""
        with pytest.raises(JobNotFoundError) as refused:
            await parity.cancel(parity.new_job().id)
        assert refused.value.code == "XJOBS_JOB_NOT_FOUND"

    async def test_the_holders_next_heartbeat_misses(self, parity: ParityEnv) -> None:
        """Rule: a cancelled running job's worker sees its next heartbeat miss."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.cancel(claimed.id)
        assert await parity.backend.jobs.heartbeat(claimed.claim, LEASE_MS) is False

    async def test_the_holders_ack_misses(self, parity: ParityEnv) -> None:
        """Rule: the settle is fenced on `state = 'running'`, so a cancel is not overwritten."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.cancel(claimed.id)
        landed = await parity.backend.jobs.ack(claimed.claim)
        assert (landed, (await parity.record(claimed.id)).state) == (False, "cancelled")

    async def test_a_cancelled_job_is_never_claimed(self, parity: ParityEnv) -> None:
        """Rule: a cancelled job is finished; no claim returns it, even after its lease lapsed."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.cancel(claimed.id)
        parity.clock.advance(LEASE_MS + 1)
        result = await parity.claim(worker_id="worker-b")
        assert (result.jobs, result.buried) == ((), ())

    async def test_frees_the_namespace(self, parity: ParityEnv) -> None:
        """Rule: the namespace is held by LIVE rows only, so a cancel frees it for a new enqueue."""
        old = await parity.enqueue(idempotency_key="k1")
        await parity.cancel(old.id)
        job = parity.new_job(idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.deduped) == (job.id, False)


class TestRequeue:
    async def test_refuses_a_missing_job(self, parity: ParityEnv) -> None:
        """Rule: `requeue` refuses a missing job (`XJOBS_JOB_NOT_FOUND`)."""
        with pytest.raises(JobNotFoundError) as refused:
            await parity.requeue(parity.new_job().id)
        assert refused.value.code == "XJOBS_JOB_NOT_FOUND"

    @pytest.mark.parametrize("state", LIVE)
    async def test_refuses_a_live_job(self, parity: ParityEnv, state: JobState) -> None:
        """Rule: `requeue` refuses a live job (`XJOBS_JOB_NOT_REQUEUEABLE`)."""
        job = await parity.job_in_state(state)
        with pytest.raises(JobNotRequeueableError) as refused:
            await parity.requeue(job.id)
        assert refused.value.code == "XJOBS_JOB_NOT_REQUEUEABLE"

    async def test_a_refused_requeue_leaves_a_live_job_as_it_was(self, parity: ParityEnv) -> None:
        """Rule: a refused requeue moves nothing (a running job keeps its claim)."""
        job = await parity.job_in_state("running")
        before = await parity.record(job.id)
        with pytest.raises(JobNotRequeueableError):
            await parity.requeue(job.id)
        assert await parity.record(job.id) == before

    async def test_refuses_a_job_whose_namespace_has_a_live_row(self, parity: ParityEnv) -> None:
        """Rule: `requeue` refuses a job whose namespace a live row holds (duplicate)."""
        old = await parity.job_in_state("dead", idempotency_key="k1")
        await parity.enqueue(idempotency_key="k1")
        with pytest.raises(JobRequeueDuplicateError) as refused:
            await parity.requeue(old.id)
        assert refused.value.code == "XJOBS_JOB_REQUEUE_DUPLICATE"

    async def test_a_duplicate_requeue_leaves_the_job_finished(self, parity: ParityEnv) -> None:
        """Rule: a refused requeue moves nothing."""
        old = await parity.job_in_state("dead", idempotency_key="k1")
        before = await parity.record(old.id)
        await parity.enqueue(idempotency_key="k1")
        with pytest.raises(JobRequeueDuplicateError):
            await parity.requeue(old.id)
        assert await parity.record(old.id) == before

    @pytest.mark.parametrize("state", FINISHED)
    async def test_puts_a_finished_job_back_to_ready_with_attempts_reset(
        self, parity: ParityEnv, state: JobState
    ) -> None:
        """Rule: `requeue` puts a finished job back to `ready` with its attempts reset."""
        job = await parity.job_in_state(state)
        requeued = await parity.requeue(job.id)
        record = await parity.record(job.id)
        assert (requeued.state, requeued.attempt, record.state, record.attempt) == (
            "ready",
            0,
            "ready",
            0,
        )

    async def test_a_requeued_job_is_claimable(self, parity: ParityEnv) -> None:
        """Rule: a requeued job is due now and is claimed as its first attempt."""
        job = await parity.job_in_state("dead")
        await parity.requeue(job.id)
        claimed = await parity.claim_one(worker_id="worker-b")
        assert (claimed.id, claimed.attempt) == (job.id, 1)

    async def test_keeps_counting_claims(self, parity: ParityEnv) -> None:
        """Rule: `claims` is the fencing token and is never reset, not even by a requeue."""
        job = await parity.job_in_state("dead")
        await parity.requeue(job.id)
        assert (await parity.claim_one()).claims == 2

    async def test_the_old_claim_misses_after_a_requeue(self, parity: ParityEnv) -> None:
        """Rule: a settle from before the requeue cannot land on the requeued run."""
        job = await parity.enqueue()
        old = await parity.claim_one(worker_id="worker-a")
        assert await parity.backend.jobs.nack(old.claim, ending(True, "gave up"))
        await parity.requeue(job.id)
        await parity.claim_one(worker_id="worker-a")
        assert await parity.backend.jobs.ack(old.claim) is False

    async def test_a_requeued_job_holds_its_namespace_again(self, parity: ParityEnv) -> None:
        """Rule: a requeued job is live, so its namespace dedupes again."""
        job = await parity.job_in_state("dead", idempotency_key="k1")
        await parity.requeue(job.id)
        (result,) = await parity.backend.jobs.enqueue([parity.new_job(idempotency_key="k1")])
        assert (result.job_id, result.deduped) == (job.id, True)


async def _retry(parity: ParityEnv, where: RequeueFilter | None = None) -> BulkResult:
    """A bulk requeue as `App.requeue_jobs` makes it: the operator surface's `retry_many`."""
    where = where or RequeueFilter()
    return await parity.introspection.retry_many(where.as_job_filter(), where.limit)


@pytest.mark.requires("introspection")
class TestRequeueMany:
    async def test_moves_every_candidate_under_the_limit(self, parity: ParityEnv) -> None:
        """Rule: a bulk move answers BulkResult(moved, remaining)."""
        for _ in range(3):
            await parity.job_in_state("dead")
        assert await _retry(parity) == BulkResult(3, 0)

    async def test_requeues_each_moved_job_to_ready(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue moves each job as `requeue` does: ready, attempts reset."""
        jobs = [await parity.job_in_state("dead") for _ in range(2)]
        await _retry(parity)
        records = [await parity.record(job.id) for job in jobs]
        assert [(r.state, r.attempt) for r in records] == [("ready", 0), ("ready", 0)]

    async def test_a_limit_leaves_the_rest_remaining(self, parity: ParityEnv) -> None:
        """Rule: `remaining` is what further calls would move."""
        for _ in range(5):
            await parity.job_in_state("dead")
        assert await _retry(parity, RequeueFilter(limit=2)) == BulkResult(2, 3)

    async def test_a_second_call_moves_the_remaining(self, parity: ParityEnv) -> None:
        """Rule: `remaining` is what a second call would move."""
        for _ in range(3):
            await parity.job_in_state("dead")
        first = await _retry(parity, RequeueFilter(limit=2))
        second = await _retry(parity, RequeueFilter(limit=2))
        assert (first, second) == (BulkResult(2, 1), BulkResult(1, 0))

    async def test_moves_only_the_asked_states(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue filters by state."""
        dead = await parity.job_in_state("dead")
        failed = await parity.job_in_state("failed")
        cancelled = await parity.job_in_state("cancelled")
        result = await _retry(parity, RequeueFilter(states=("failed",)))
        states = [(await parity.record(j.id)).state for j in (dead, failed, cancelled)]
        assert (result, states) == (BulkResult(1, 0), ["dead", "ready", "cancelled"])

    async def test_moves_several_states_at_once(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue moves every state it names."""
        await parity.job_in_state("dead")
        await parity.job_in_state("failed")
        await parity.job_in_state("cancelled")
        where = RequeueFilter(states=("dead", "cancelled"))
        assert await _retry(parity, where) == BulkResult(2, 0)

    async def test_moves_only_the_asked_queue(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue filters by queue."""
        alpha = await parity.job_in_state("dead", queue="alpha")
        beta = await parity.job_in_state("dead", queue="beta")
        result = await _retry(parity, RequeueFilter(queue="alpha"))
        states = [(await parity.record(j.id)).state for j in (alpha, beta)]
        assert (result, states) == (BulkResult(1, 0), ["ready", "dead"])

    async def test_moves_only_the_asked_job_name(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue filters by job name."""
        first = await parity.job_in_state("dead", name="first_job")
        second = await parity.job_in_state("dead", name="second_job")
        result = await _retry(parity, RequeueFilter(name="second_job"))
        states = [(await parity.record(j.id)).state for j in (first, second)]
        assert (result, states) == (BulkResult(1, 0), ["dead", "ready"])

    async def test_never_touches_a_live_job(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue moves finished jobs only."""
        await parity.job_in_state("dead")
        running = await parity.job_in_state("running")
        before = await parity.record(running.id)
        await _retry(parity, RequeueFilter(states=("dead", "failed")))
        assert await parity.record(running.id) == before

    async def test_skips_a_job_whose_namespace_has_a_live_row(self, parity: ParityEnv) -> None:
        """Rule: a bulk requeue never makes a duplicate, and does not count one as remaining."""
        await parity.job_in_state("dead", idempotency_key="k1")
        await parity.enqueue(idempotency_key="k1")
        assert await _retry(parity) == BulkResult(0, 0)

    async def test_moves_one_of_two_finished_jobs_sharing_a_namespace(
        self, parity: ParityEnv
    ) -> None:
        """Rule: once one row of a namespace is requeued, the other is a duplicate, not remaining."""
        await parity.job_in_state("dead", idempotency_key="k1")
        await parity.job_in_state("dead", idempotency_key="k1")
        assert await _retry(parity) == BulkResult(1, 0)


class TestMoveAnswers:
    """The driver answers a move's status; core raises the one refusal (operate/moves.py)."""

    async def test_cancel_answers_done_with_the_record(self, parity: ParityEnv) -> None:
        """Rule: a cancel that moved the job answers `done` and the cancelled record."""
        job = await parity.enqueue()
        move = await parity.backend.jobs.cancel(job.id, "why")
        assert (move.status, move.record and move.record.state) == ("done", "cancelled")

    async def test_cancel_answers_finished_with_the_state(self, parity: ParityEnv) -> None:
        """Rule: a cancel of a finished job answers `finished` and the state it is in."""
        job = await parity.job_in_state("dead")
        move = await parity.backend.jobs.cancel(job.id)
        assert (move.status, move.state, move.record) == ("finished", "dead", None)

    async def test_cancel_answers_missing(self, parity: ParityEnv) -> None:
        """Rule: a cancel of an unknown id answers `missing`."""
        move = await parity.backend.jobs.cancel(parity.new_job().id)
        assert move.status == "missing"

    async def test_requeue_answers_live_with_the_state(self, parity: ParityEnv) -> None:
        """Rule: a requeue of a live job answers `live` and its state."""
        job = await parity.job_in_state("running")
        move = await parity.backend.jobs.requeue(job.id)
        assert (move.status, move.state) == ("live", "running")

    async def test_requeue_answers_duplicate_with_the_holder(self, parity: ParityEnv) -> None:
        """Rule: a requeue whose namespace a live job holds answers `duplicate` naming that job."""
        old = await parity.job_in_state("dead", idempotency_key="k1")
        holder = await parity.enqueue(idempotency_key="k1")
        move = await parity.backend.jobs.requeue(old.id)
        assert (move.status, move.holder) == ("duplicate", holder.id)

    async def test_requeue_answers_missing(self, parity: ParityEnv) -> None:
        """Rule: a requeue of an unknown id answers `missing`."""
        move = await parity.backend.jobs.requeue(parity.new_job().id)
        assert move.status == "missing"
