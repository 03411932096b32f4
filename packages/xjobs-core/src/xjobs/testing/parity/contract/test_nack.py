"""Parity: the ways a run that did not complete settles (semantics.md, "nack variants")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from xjobs.contract.driver import Nack
from xjobs.run.settle import ending, handing_back, parking, retrying, shedding

if TYPE_CHECKING:
    from xjobs.contract.driver import ClaimedJob
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = 1_000
LATER_MS = 5_000


async def _claimed(parity: ParityEnv, **overrides: object) -> ClaimedJob:
    await parity.enqueue(**overrides)
    return await parity.claim_one(lease_ms=LEASE_MS)


async def _nack(parity: ParityEnv, claimed: ClaimedJob, nack: Nack) -> None:
    assert await parity.backend.jobs.nack(claimed.claim, nack), "the holder's nack must land"


class TestNack:
    async def test_a_retry_goes_back_to_ready_at_its_time(self, parity: ParityEnv) -> None:
        """Rule: `retry` goes back to `ready` at `run_at`, with `last_error` set."""
        claimed = await _claimed(parity)
        retry_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, retrying("boom", retry_at))
        record = await parity.record(claimed.id)
        assert (record.state, record.run_at_ms, record.last_error) == ("ready", retry_at, "boom")

    async def test_a_retry_counts_the_attempt(self, parity: ParityEnv) -> None:
        """Rule: a retry counts as an attempt: the next claim is attempt 2."""
        claimed = await _claimed(parity)
        retry_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, retrying("boom", retry_at))
        assert (await parity.record(claimed.id)).attempt == 1
        parity.clock.set(retry_at + 1)
        assert (await parity.claim_one()).attempt == 2

    async def test_a_retry_is_not_claimable_before_its_time(self, parity: ParityEnv) -> None:
        """Rule: a retry is delayed until its `run_at`."""
        claimed = await _claimed(parity)
        retry_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, retrying("boom", retry_at))
        parity.clock.set(retry_at - 1)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()

    async def test_an_uncounted_retry_gives_the_attempt_back(self, parity: ParityEnv) -> None:
        """Rule: `counts_as_attempt=False` hands the claim's attempt back."""
        claimed = await _claimed(parity)
        await _nack(
            parity,
            claimed,
            handing_back(parity.clock.now_ms()),
        )
        record = await parity.record(claimed.id)
        assert (record.state, record.attempt) == ("ready", 0)

    async def test_an_uncounted_retry_is_claimed_as_the_same_attempt(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an uncounted retry is not charged: the next claim is attempt 1 again."""
        claimed = await _claimed(parity)
        await _nack(
            parity,
            claimed,
            handing_back(parity.clock.now_ms()),
        )
        again = await parity.claim_one()
        assert (again.attempt, again.claims) == (1, 2)

    async def test_dead_is_terminal(self, parity: ParityEnv) -> None:
        """Rule: `dead` is terminal, kept for an operator with its error and finish time."""
        claimed = await _claimed(parity)
        now = parity.clock.advance(10)
        await _nack(parity, claimed, ending(True, "gave up"))
        record = await parity.record(claimed.id)
        assert (record.state, record.last_error, record.finished_at_ms) == ("dead", "gave up", now)

    async def test_fail_is_terminal(self, parity: ParityEnv) -> None:
        """Rule: `fail` is terminal (`failed`), with its error and finish time."""
        claimed = await _claimed(parity)
        now = parity.clock.advance(10)
        await _nack(parity, claimed, ending(False, "bad input"))
        record = await parity.record(claimed.id)
        assert (record.state, record.last_error, record.finished_at_ms) == (
            "failed",
            "bad input",
            now,
        )

    @pytest.mark.parametrize("dead_letter", [True, False])
    async def test_a_terminal_nack_is_never_claimed_again(
        self, parity: ParityEnv, dead_letter: bool
    ) -> None:
        """Rule: a `dead` or `failed` job is finished; no claim returns it."""
        claimed = await _claimed(parity)
        await _nack(parity, claimed, ending(dead_letter, "x"))
        parity.clock.advance(LATER_MS)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()

    async def test_park_waits_uncounted(self, parity: ParityEnv) -> None:
        """Rule: `park` is a suspension: `waiting`, and uncounted with counts_as_attempt=False."""
        claimed = await _claimed(parity)
        wake_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, parking(wake_at))
        record = await parity.record(claimed.id)
        assert (record.state, record.attempt) == ("waiting", 0)

    async def test_a_parked_job_is_not_claimable_before_its_time(self, parity: ParityEnv) -> None:
        """Rule: a parked job waits until its wake time."""
        claimed = await _claimed(parity)
        wake_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, parking(wake_at))
        parity.clock.set(wake_at - 1)
        assert (await parity.claim(worker_id="worker-b")).jobs == ()

    async def test_a_parked_job_is_claimable_once_its_time_passed(self, parity: ParityEnv) -> None:
        """Rule: a parked job is claimable again once its `run_at` passed, as the same attempt."""
        claimed = await _claimed(parity)
        wake_at = parity.clock.now_ms() + LATER_MS
        await _nack(parity, claimed, parking(wake_at))
        parity.clock.set(wake_at + 1)
        resumed = await parity.claim_one(worker_id="worker-b")
        assert (resumed.id, resumed.attempt, resumed.claims) == (claimed.id, 1, 2)

    async def test_shed_goes_back_to_ready_uncharged(self, parity: ParityEnv) -> None:
        """Rule: shed (`counts_as_attempt=False`) stays `ready` and gives the attempt back."""
        claimed = await _claimed(parity)
        await _nack(
            parity,
            claimed,
            shedding(parity.clock.now_ms() + 100),
        )
        record = await parity.record(claimed.id)
        assert (record.state, record.attempt) == ("ready", 0)

    async def test_shed_leaves_last_error_unchanged(self, parity: ParityEnv) -> None:
        """Rule: a nack with no error (a shed) writes no `last_error`; the one a previous attempt left stays."""
        first = await _claimed(parity)
        await _nack(parity, first, retrying("first failure"))
        second = await parity.claim_one(lease_ms=LEASE_MS)
        await _nack(
            parity,
            second,
            shedding(parity.clock.now_ms() + 100),
        )
        assert (await parity.record(second.id)).last_error == "first failure"

    async def test_a_shed_job_is_claimable_at_its_time(self, parity: ParityEnv) -> None:
        """Rule: a shed job is ready again at its `run_at`, as the same attempt."""
        claimed = await _claimed(parity)
        retry_at = parity.clock.now_ms() + 100
        await _nack(parity, claimed, shedding(retry_at))
        parity.clock.set(retry_at + 1)
        again = await parity.claim_one(worker_id="worker-b")
        assert (again.id, again.attempt) == (claimed.id, 1)
