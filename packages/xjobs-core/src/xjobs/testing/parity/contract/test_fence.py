"""Parity: every settle is fenced on the claim (semantics.md, "Claims, leases and settlement")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.driver import BatchAck, Claim
from xjobs.ids import new_id
from xjobs.run.settle import retrying

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from xjobs.contract.driver import JobDriver
    from xjobs.testing.parity.env import ParityEnv

    FencedWrite = Callable[[JobDriver, Claim], Awaitable[bool]]

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = 1_000


async def _ack(jobs: JobDriver, claim: Claim) -> bool:
    return await jobs.ack(claim)


async def _ack_many(jobs: JobDriver, claim: Claim) -> bool:
    assert isinstance(jobs, BatchAck), "a backend declaring ack_many has a driver with ack_many()"
    (landed,) = await jobs.ack_many([claim])
    return landed


async def _nack(jobs: JobDriver, claim: Claim) -> bool:
    return await jobs.nack(claim, retrying("boom"))


async def _heartbeat(jobs: JobDriver, claim: Claim) -> bool:
    return await jobs.heartbeat(claim, LEASE_MS)


async def _record_progress(jobs: JobDriver, claim: Claim) -> bool:
    return await jobs.record_progress(claim, 0.5)


each_fenced_write = pytest.mark.parametrize(
    "write",
    [
        _ack,
        # a backend that does not declare the feature acks one run at a time
        pytest.param(_ack_many, marks=pytest.mark.requires("ack_many")),
        _nack,
        _heartbeat,
        _record_progress,
    ],
    ids=["ack", "ack_many", "nack", "heartbeat", "record_progress"],
)


class TestFence:
    @each_fenced_write
    async def test_the_holder_lands(self, parity: ParityEnv, write: FencedWrite) -> None:
        """Rule: a fenced write by the worker holding the claim answers True."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        assert await write(parity.backend.jobs, claimed.claim) is True

    @each_fenced_write
    async def test_a_wrong_worker_misses(self, parity: ParityEnv, write: FencedWrite) -> None:
        """Rule: the fence includes `worker_id`; another worker's write answers False."""
        await parity.enqueue()
        claimed = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        intruder = Claim(job_id=claimed.id, worker_id="worker-b", claims=claimed.claims)
        assert await write(parity.backend.jobs, intruder) is False

    @each_fenced_write
    async def test_a_wrong_worker_changes_nothing(
        self, parity: ParityEnv, write: FencedWrite
    ) -> None:
        """Rule: a write that missed the fence leaves the row as it was."""
        await parity.enqueue()
        claimed = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        before = await parity.record(claimed.id)
        intruder = Claim(job_id=claimed.id, worker_id="worker-b", claims=claimed.claims)
        await write(parity.backend.jobs, intruder)
        assert await parity.record(claimed.id) == before

    @each_fenced_write
    async def test_a_stale_claim_misses_after_a_reclaim(
        self, parity: ParityEnv, write: FencedWrite
    ) -> None:
        """Rule: the fence includes `claims`; the old holder's write misses once the job moved on."""
        await parity.enqueue()
        stale = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim_one(worker_id="worker-b", lease_ms=LEASE_MS)
        assert await write(parity.backend.jobs, stale.claim) is False

    @each_fenced_write
    async def test_a_stale_claim_changes_nothing(
        self, parity: ParityEnv, write: FencedWrite
    ) -> None:
        """Rule: the old holder's missed write leaves the new holder's row as it was."""
        await parity.enqueue()
        stale = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        await parity.claim_one(worker_id="worker-b", lease_ms=LEASE_MS)
        before = await parity.record(stale.id)
        await write(parity.backend.jobs, stale.claim)
        assert await parity.record(stale.id) == before

    @each_fenced_write
    async def test_the_same_worker_misses_under_an_older_claim(
        self, parity: ParityEnv, write: FencedWrite
    ) -> None:
        """Rule: `claims` is the fencing token; a worker's own earlier claim no longer holds."""
        await parity.enqueue()
        stale = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        current = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        assert (current.claims, await write(parity.backend.jobs, stale.claim)) == (2, False)

    @each_fenced_write
    async def test_a_job_back_in_ready_misses(self, parity: ParityEnv, write: FencedWrite) -> None:
        """Rule: the fence includes `state = 'running'`; a job that settled back to ready misses."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        retry_at = parity.clock.now_ms() + 60_000
        assert await parity.backend.jobs.nack(claimed.claim, retrying(None, retry_at))
        before = await parity.record(claimed.id)
        assert (
            await write(parity.backend.jobs, claimed.claim),
            await parity.record(claimed.id),
        ) == (
            False,
            before,
        )

    @each_fenced_write
    async def test_a_finished_job_misses(self, parity: ParityEnv, write: FencedWrite) -> None:
        """Rule: the fence includes `state = 'running'`; a completed job takes no more writes."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        assert await parity.backend.jobs.ack(claimed.claim)
        before = await parity.record(claimed.id)
        assert (
            await write(parity.backend.jobs, claimed.claim),
            await parity.record(claimed.id),
        ) == (
            False,
            before,
        )

    @each_fenced_write
    async def test_a_missing_job_misses(self, parity: ParityEnv, write: FencedWrite) -> None:
        """Rule: a fenced write answers whether it landed; a missing job is a miss, never raised."""
        ghost = Claim(job_id=parity.new_job().id, worker_id="worker-a", claims=1)
        assert await write(parity.backend.jobs, ghost) is False


class TestAck:
    async def test_completes_the_job(self, parity: ParityEnv) -> None:
        """Rule: `ack` settles a run `completed`, a terminal state with its finish time."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        now = parity.clock.advance(10)
        await parity.backend.jobs.ack(claimed.claim)
        record = await parity.record(claimed.id)
        assert (record.state, record.finished_at_ms) == ("completed", now)

    async def test_a_completed_job_is_never_claimed_again(self, parity: ParityEnv) -> None:
        """Rule: a completed job is terminal; no claim returns it."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.backend.jobs.ack(claimed.claim)
        parity.clock.advance(LEASE_MS + 1)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()


@pytest.mark.requires("ack_many")
class TestAckMany:
    async def test_each_claim_answers_for_itself(self, parity: ParityEnv) -> None:
        """Rule: a batched ack fences every claim on its own; a miss leaves its row, the rest land."""
        jobs = parity.backend.jobs
        assert isinstance(jobs, BatchAck)
        for _ in range(3):
            await parity.enqueue()
        first, second, third = (await parity.claim(worker_id="worker-a", lease_ms=LEASE_MS)).jobs
        intruder = Claim(job_id=second.id, worker_id="worker-b", claims=second.claims)
        landed = await jobs.ack_many([first.claim, intruder, third.claim])
        states = [(await parity.record(j.id)).state for j in (first, second, third)]
        assert (landed, states) == ([True, False, True], ["completed", "running", "completed"])

    async def test_a_claim_on_no_job_misses_and_the_rest_land(self, parity: ParityEnv) -> None:
        """Rule: a claim whose job does not exist answers False in its place; the batch lands."""
        jobs = parity.backend.jobs
        assert isinstance(jobs, BatchAck)
        for _ in range(2):
            await parity.enqueue()
        first, second = (await parity.claim(worker_id="worker-a", lease_ms=LEASE_MS)).jobs
        ghost = Claim(job_id=new_id(), worker_id="worker-a", claims=1)
        landed = await jobs.ack_many([ghost, first.claim, second.claim])
        states = [(await parity.record(j.id)).state for j in (first, second)]
        assert (landed, states) == ([False, True, True], ["completed", "completed"])


class TestHeartbeat:
    async def test_extends_the_lease_from_the_drivers_now(self, parity: ParityEnv) -> None:
        """Rule: `heartbeat` extends `lease_until` by `lease_ms` from the driver's now."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        now = parity.clock.advance(600)
        await parity.backend.jobs.heartbeat(claimed.claim, 5_000)
        assert (await parity.record(claimed.id)).lease_until_ms == now + 5_000

    async def test_an_extended_lease_is_not_reclaimed(self, parity: ParityEnv) -> None:
        """Rule: a lease renewed by a heartbeat has not lapsed, so no other worker claims it."""
        await parity.enqueue()
        claimed = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(600)
        await parity.backend.jobs.heartbeat(claimed.claim, LEASE_MS)
        parity.clock.advance(600)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()

    async def test_an_extended_lease_lapses_in_its_turn(self, parity: ParityEnv) -> None:
        """Rule: a heartbeat moves the lapse, it does not cancel it."""
        job = await parity.enqueue()
        claimed = await parity.claim_one(worker_id="worker-a", lease_ms=LEASE_MS)
        parity.clock.advance(600)
        await parity.backend.jobs.heartbeat(claimed.claim, LEASE_MS)
        parity.clock.advance(LEASE_MS + 1)
        assert (await parity.claim_one(worker_id="worker-b")).id == job.id


class TestProgress:
    async def test_stores_the_runs_progress(self, parity: ParityEnv) -> None:
        """Rule: `record_progress` stores the run's progress (0.0 to 1.0) under the fence."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.backend.jobs.record_progress(claimed.claim, 0.25)
        assert (await parity.record(claimed.id)).progress == 0.25

    async def test_a_later_progress_replaces_the_earlier(self, parity: ParityEnv) -> None:
        """Rule: progress is the run's latest reading, not an accumulation."""
        await parity.enqueue()
        claimed = await parity.claim_one(lease_ms=LEASE_MS)
        await parity.backend.jobs.record_progress(claimed.claim, 0.25)
        await parity.backend.jobs.record_progress(claimed.claim, 0.75)
        assert (await parity.record(claimed.id)).progress == 0.75
