"""Parity: claims, lease lapses and burying (semantics.md, "Claims, leases and settlement")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT, ClaimOptions, ClaimResult
from xjobs.errors import ClaimQueuesEmptyError
from xjobs.ids import new_id

if TYPE_CHECKING:
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = 1_000


class TestClaim:
    async def test_refuses_a_claim_over_no_queue(self, parity: ParityEnv) -> None:
        """Rule: `claim(queues=[])` is refused by every driver (`XJOBS_CLAIM_QUEUES_EMPTY`)."""
        await parity.enqueue()
        options = ClaimOptions(worker_id="worker-a", queues={}, lease_ms=LEASE_MS)
        pending = parity.backend.jobs.claim(options)  # the refusal comes when it is awaited
        with pytest.raises(ClaimQueuesEmptyError) as refused:
            await pending
        assert refused.value.code == "XJOBS_CLAIM_QUEUES_EMPTY"

    async def test_a_refused_claim_moves_nothing(self, parity: ParityEnv) -> None:
        """Rule: a claim over no queue is refused before it touches a row."""
        job = await parity.enqueue()
        with pytest.raises(ClaimQueuesEmptyError):
            await parity.claim({})
        assert (await parity.record(job.id)).state == "ready"

    async def test_answers_nothing_from_an_empty_queue(self, parity: ParityEnv) -> None:
        """Rule: a claim moves up to the asked number of ready jobs — none when there are none."""
        assert await parity.claim() == ClaimResult(jobs=(), buried=())

    async def test_moves_the_job_to_running_under_a_new_claim(self, parity: ParityEnv) -> None:
        """Rule: a claim increments attempt and claims, sets claimed_by and lease_until."""
        job = await parity.enqueue()
        now = parity.clock.now_ms()
        await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        record = await parity.record(job.id)
        assert (
            record.state,
            record.attempt,
            record.claims,
            record.claimed_by,
            record.lease_until_ms,
        ) == ("running", 1, 1, "worker-a", now + LEASE_MS)

    async def test_answers_the_claimed_job_with_every_column_the_run_needs(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the claim answers the run's columns and its fence (no read after the claim)."""
        job = await parity.enqueue(
            tenant_id="org-1",
            payload='{"n": 7}',
            priority=4,
            max_attempts=5,
            dead_letter=False,
            enqueued_by="user-1",
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        now = parity.clock.now_ms()
        claimed = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        assert (
            claimed.id,
            claimed.run_id,
            claimed.name,
            claimed.queue,
            claimed.tenant_id,
            claimed.payload,
            claimed.priority,
            claimed.attempt,
            claimed.max_attempts,
            claimed.dead_letter,
            claimed.claims,
            claimed.worker_id,
            claimed.lease_until_ms,
            claimed.enqueued_by,
            claimed.traceparent,
            claimed.created_at_ms,
        ) == (
            job.id,
            job.run_id,
            job.name,
            job.queue,
            "org-1",
            '{"n": 7}',
            4,
            1,
            5,
            False,
            1,
            "worker-a",
            now + LEASE_MS,
            "user-1",
            job.traceparent,
            now,
        )

    async def test_takes_the_lowest_priority_number_first(self, parity: ParityEnv) -> None:
        """Rule: claim order is priority (lower first) before `run_at`."""
        now = parity.clock.now_ms()
        late_urgent = await parity.enqueue(priority=1, run_at_ms=now + 20)
        await parity.enqueue(priority=5, run_at_ms=now + 10)
        await parity.enqueue(priority=3, run_at_ms=now + 10)
        parity.clock.advance(20)
        assert (await parity.claim_one()).id == late_urgent.id

    async def test_claims_in_priority_order(self, parity: ParityEnv) -> None:
        """Rule: claim order is priority, lower first."""
        by_priority = {p: await parity.enqueue(priority=p) for p in (5, 1, 3)}
        claimed = [(await parity.claim_one()).id for _ in range(3)]
        assert claimed == [by_priority[1].id, by_priority[3].id, by_priority[5].id]

    async def test_breaks_a_priority_tie_by_run_at(self, parity: ParityEnv) -> None:
        """Rule: claim order is priority, then `run_at` (before id)."""
        low_id, high_id = sorted([new_id(), new_id()])
        now = parity.clock.now_ms()
        await parity.enqueue(id=low_id, run_at_ms=now + 20)
        await parity.enqueue(id=high_id, run_at_ms=now + 10)
        parity.clock.advance(20)
        assert (await parity.claim_one()).id == high_id

    async def test_breaks_a_priority_and_run_at_tie_by_id(self, parity: ParityEnv) -> None:
        """Rule: claim order is priority, then `run_at`, then id."""
        low_id, high_id = sorted([new_id(), new_id()])
        run_at = parity.clock.now_ms() + 10
        await parity.enqueue(id=high_id, run_at_ms=run_at)
        await parity.enqueue(id=low_id, run_at_ms=run_at)
        parity.clock.advance(10)
        assert (await parity.claim_one()).id == low_id

    async def test_jobs_enqueued_in_a_row_are_claimed_in_that_order(
        self, parity: ParityEnv
    ) -> None:
        """Rule: ids made in one process strictly increase (within one ms too), so jobs of one
        priority and `run_at` enqueued one after another are claimed in the order enqueued."""
        run_at = parity.clock.now_ms()
        enqueued = [(await parity.enqueue(run_at_ms=run_at)).id for _ in range(50)]
        claimed = [(await parity.claim_one()).id for _ in range(50)]
        assert claimed == enqueued

    async def test_takes_at_most_the_asked_number_from_each_queue(self, parity: ParityEnv) -> None:
        """Rule: a claim takes at most `queues[q]` jobs from each queue."""
        for queue in ("alpha", "beta"):
            for _ in range(3):
                await parity.enqueue(queue=queue)
        result = await parity.claim({"alpha": 2, "beta": 1})
        assert sorted(job.queue for job in result.jobs) == ["alpha", "alpha", "beta"]

    async def test_a_total_limit_caps_the_claim_across_queues(self, parity: ParityEnv) -> None:
        """Rule: a claim takes at most `limit` jobs in all, whatever the per-queue asks."""
        for queue in ("alpha", "beta"):
            for _ in range(3):
                await parity.enqueue(queue=queue)
        result = await parity.claim({"alpha": 3, "beta": 3}, limit=4)
        assert len(result.jobs) == 4

    async def test_a_total_limit_takes_jobs_in_claim_order_across_queues(
        self, parity: ParityEnv
    ) -> None:
        """Rule: across queues the claim takes jobs in claim order (priority, run_at, id)."""
        await parity.enqueue(queue="alpha", priority=5)
        urgent = await parity.enqueue(queue="beta", priority=1)
        await parity.enqueue(queue="alpha", priority=3)
        result = await parity.claim({"alpha": 2, "beta": 2}, limit=1)
        assert [job.id for job in result.jobs] == [urgent.id]

    async def test_a_total_limit_still_respects_each_queues_ask(self, parity: ParityEnv) -> None:
        """Rule: `limit` caps the pass; `queues[q]` still caps each queue within it."""
        for priority in (1, 2, 3):
            await parity.enqueue(queue="alpha", priority=priority)
        await parity.enqueue(queue="beta", priority=9)
        result = await parity.claim({"alpha": 1, "beta": 1}, limit=2)
        assert sorted(job.queue for job in result.jobs) == ["alpha", "beta"]

    async def test_leaves_the_rest_of_a_queue_ready(self, parity: ParityEnv) -> None:
        """Rule: a per-queue limit leaves the jobs beyond it ready for the next claim."""
        jobs = [await parity.enqueue() for _ in range(3)]
        taken = {job.id for job in (await parity.claim({"parity": 2})).jobs}
        states = [(await parity.record(job.id)).state for job in jobs if job.id not in taken]
        assert states == ["ready"]

    async def test_touches_only_the_named_queues(self, parity: ParityEnv) -> None:
        """Rule: a claim moves jobs only from the queues it names."""
        await parity.enqueue(queue="alpha")
        other = await parity.enqueue(queue="beta")
        await parity.claim({"alpha": 10})
        record = await parity.record(other.id)
        assert (record.state, record.attempt, record.claims) == ("ready", 0, 0)

    async def test_a_held_lease_is_not_claimable(self, parity: ParityEnv) -> None:
        """Rule: a running job whose lease has not lapsed belongs to its holder."""
        await parity.enqueue()
        await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS - 1)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()

    async def test_reclaims_a_lapsed_lease_for_another_worker(self, parity: ParityEnv) -> None:
        """Rule: a running job whose lease lapsed is claimable again, attempt+1 and claims+1."""
        job = await parity.enqueue(max_attempts=3)
        await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        reclaimed = await parity.claim_one(worker_id="worker-b", lease_ms=LEASE_MS)
        assert (reclaimed.id, reclaimed.worker_id, reclaimed.attempt, reclaimed.claims) == (
            job.id,
            "worker-b",
            2,
            2,
        )

    async def test_a_reclaim_moves_the_stored_claim(self, parity: ParityEnv) -> None:
        """Rule: a reclaim stamps the new holder and a lease from the claim's now."""
        job = await parity.enqueue(max_attempts=3)
        await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        now = parity.clock.advance(LEASE_MS + 1)
        await parity.claim_one(worker_id="worker-b", lease_ms=LEASE_MS)
        record = await parity.record(job.id)
        assert (record.state, record.claimed_by, record.claims, record.lease_until_ms) == (
            "running",
            "worker-b",
            2,
            now + LEASE_MS,
        )

    async def test_buries_a_lapsed_lease_on_the_final_attempt(self, parity: ParityEnv) -> None:
        """Rule: a lapsed lease with attempt >= max_attempts is buried `dead`, never returned."""
        job = await parity.enqueue(max_attempts=1)
        await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        result = await parity.claim(worker_id="worker-b")
        assert result.jobs == ()
        assert [(b.id, b.run_id, b.name, b.queue, b.state, b.attempt) for b in result.buried] == [
            (job.id, job.run_id, job.name, job.queue, "dead", 1)
        ]

    async def test_a_buried_job_is_stored_dead(self, parity: ParityEnv) -> None:
        """Rule: burying settles the row `dead` (a terminal state)."""
        job = await parity.enqueue(max_attempts=1)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim(worker_id="worker-b")
        record = await parity.record(job.id)
        assert (record.state, record.attempt) == ("dead", 1)

    async def test_a_buried_job_records_why(self, parity: ParityEnv) -> None:
        """Rule: every driver buries with the one lapsed-lease error text of the contract."""
        job = await parity.enqueue(max_attempts=1)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim(worker_id="worker-b")
        assert (await parity.record(job.id)).last_error == LAPSED_ON_FINAL_ATTEMPT

    async def test_buries_a_job_without_dead_letter_as_failed(self, parity: ParityEnv) -> None:
        """Rule: burying a job with dead_letter=False settles it `failed`, not `dead`."""
        job = await parity.enqueue(max_attempts=1, dead_letter=False)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        result = await parity.claim(worker_id="worker-b")
        assert [(b.id, b.state) for b in result.buried] == [(job.id, "failed")]
        assert (await parity.record(job.id)).state == "failed"

    async def test_buries_after_the_retries_ran_out(self, parity: ParityEnv) -> None:
        """Rule: the final attempt is attempt >= max_attempts, however the attempts were spent."""
        job = await parity.enqueue(max_attempts=2)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        second = await parity.claim_one(worker_id="worker-b", lease_ms=LEASE_MS)
        assert second.attempt == 2
        parity.clock.advance(LEASE_MS + 1)
        result = await parity.claim(worker_id="worker-c")
        assert (result.jobs, [b.id for b in result.buried]) == ((), [job.id])

    async def test_never_claims_a_buried_job_again(self, parity: ParityEnv) -> None:
        """Rule: a buried job is terminal; later claims neither return nor bury it again."""
        await parity.enqueue(max_attempts=1)
        await parity.claim_one(lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim(worker_id="worker-b")
        parity.clock.advance(LEASE_MS + 1)
        result = await parity.claim(worker_id="worker-c")
        assert (result.jobs, result.buried) == ((), ())
