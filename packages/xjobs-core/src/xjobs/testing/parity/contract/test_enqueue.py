"""Parity: enqueue and the idempotency namespace (semantics.md, "Enqueue and idempotency")."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xjobs.contract.driver import JobState
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity


class TestEnqueue:
    async def test_a_new_job_is_ready_with_attempt_zero(self, parity: ParityEnv) -> None:
        """Rule: an enqueued job starts `ready`, attempt 0, claims 0."""
        job = parity.new_job()
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.run_id, result.deduped) == (job.id, job.run_id, False)
        record = await parity.backend.jobs.get(job.id)
        assert record is not None
        assert (record.state, record.attempt, record.claims) == ("ready", 0, 0)

    async def test_a_live_namespace_dedupes_to_the_existing_job(self, parity: ParityEnv) -> None:
        """Rule: the namespace (name, coalesce(tenant_id, ''), key) is unique among live rows."""
        first = parity.new_job(idempotency_key="k1")
        second = parity.new_job(idempotency_key="k1")
        (a,) = await parity.backend.jobs.enqueue([first])
        (b,) = await parity.backend.jobs.enqueue([second])
        assert b.deduped is True
        assert (b.job_id, b.run_id) == (a.job_id, a.run_id)
        assert await parity.backend.jobs.get(second.id) is None

    @pytest.mark.parametrize("state", ["running", "waiting"])
    async def test_a_claimed_or_parked_job_still_holds_its_namespace(
        self, parity: ParityEnv, state: JobState
    ) -> None:
        """Rule: running and waiting are live states, so their namespace still dedupes."""
        first = await parity.job_in_state(state, idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([parity.new_job(idempotency_key="k1")])
        assert (result.job_id, result.run_id, result.deduped) == (first.id, first.run_id, True)

    async def test_a_null_and_an_empty_tenant_share_a_namespace(self, parity: ParityEnv) -> None:
        """Rule: the namespace spells the tenant as coalesce(tenant_id, '')."""
        first = await parity.enqueue(tenant_id=None, idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue(
            [parity.new_job(tenant_id="", idempotency_key="k1")]
        )
        assert (result.job_id, result.deduped) == (first.id, True)

    async def test_an_empty_and_a_null_tenant_share_a_namespace(self, parity: ParityEnv) -> None:
        """Rule: the namespace spells the tenant as coalesce(tenant_id, ''), whichever came first."""
        first = await parity.enqueue(tenant_id="", idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue(
            [parity.new_job(tenant_id=None, idempotency_key="k1")]
        )
        assert (result.job_id, result.deduped) == (first.id, True)

    async def test_another_tenant_is_another_namespace(self, parity: ParityEnv) -> None:
        """Rule: the tenant is part of the idempotency namespace."""
        await parity.enqueue(tenant_id="org-1", idempotency_key="k1")
        job = parity.new_job(tenant_id="org-2", idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.deduped) == (job.id, False)

    async def test_an_org_tenant_and_no_tenant_are_different_namespaces(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only a null tenant coalesces to ''; an org's namespace is its own."""
        await parity.enqueue(tenant_id=None, idempotency_key="k1")
        job = parity.new_job(tenant_id="org-1", idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.deduped) == (job.id, False)

    async def test_another_name_is_another_namespace(self, parity: ParityEnv) -> None:
        """Rule: the job name is part of the idempotency namespace."""
        await parity.enqueue(name="first_job", idempotency_key="k1")
        job = parity.new_job(name="second_job", idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.deduped) == (job.id, False)

    @pytest.mark.parametrize("state", ["completed", "failed", "dead", "cancelled"])
    async def test_a_finished_namespace_takes_a_new_job(
        self, parity: ParityEnv, state: JobState
    ) -> None:
        """Rule: the namespace is unique among LIVE rows only; a finished job no longer holds it."""
        await parity.job_in_state(state, idempotency_key="k1")
        job = parity.new_job(idempotency_key="k1")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.run_id, result.deduped) == (job.id, job.run_id, False)

    async def test_a_repeated_job_id_is_deduped_while_it_is_live(self, parity: ParityEnv) -> None:
        """Rule: a repeated publish of the same id is deduped (live)."""
        job = await parity.enqueue()
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.run_id, result.deduped) == (job.id, job.run_id, True)

    async def test_a_repeated_job_id_is_deduped_once_it_finished(self, parity: ParityEnv) -> None:
        """Rule: a repeated publish of the same id is deduped (finished): it never runs twice."""
        job = await parity.job_in_state("completed")
        (result,) = await parity.backend.jobs.enqueue([job])
        assert (result.job_id, result.run_id, result.deduped) == (job.id, job.run_id, True)
        assert (await parity.record(job.id)).state == "completed"

    async def test_a_bulk_enqueue_answers_one_result_per_row_in_order(
        self, parity: ParityEnv
    ) -> None:
        """Rule: bulk enqueue is one call per batch, answering each row in the batch's order."""
        jobs = [parity.new_job() for _ in range(5)]
        results = await parity.backend.jobs.enqueue(jobs)
        assert [(r.job_id, r.run_id, r.deduped) for r in results] == [
            (j.id, j.run_id, False) for j in jobs
        ]

    async def test_a_duplicate_inside_one_batch_dedupes_to_the_first(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a batch is enqueued row by row, so a later row in a live namespace is deduped."""
        first = parity.new_job(idempotency_key="k1")
        other = parity.new_job(idempotency_key="k2")
        again = parity.new_job(idempotency_key="k1")
        results = await parity.backend.jobs.enqueue([first, other, again])
        assert [(r.job_id, r.deduped) for r in results] == [
            (first.id, False),
            (other.id, False),
            (first.id, True),
        ]
        assert await parity.backend.jobs.get(again.id) is None

    async def test_a_repeated_id_inside_one_batch_dedupes_to_the_first(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a repeated publish of the same id is deduped, even inside one batch."""
        job = parity.new_job()
        results = await parity.backend.jobs.enqueue([job, job])
        assert [(r.job_id, r.run_id, r.deduped) for r in results] == [
            (job.id, job.run_id, False),
            (job.id, job.run_id, True),
        ]

    async def test_a_delayed_job_is_ready_at_its_run_at(self, parity: ParityEnv) -> None:
        """Rule: a `ready` job with a future `run_at` is a delayed job."""
        run_at = parity.clock.now_ms() + 5_000
        job = await parity.enqueue(run_at_ms=run_at)
        record = await parity.record(job.id)
        assert (record.state, record.run_at_ms) == ("ready", run_at)

    async def test_a_delayed_job_is_not_claimable_before_its_run_at(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a future `run_at` is not claimable until the clock reaches it."""
        await parity.enqueue(run_at_ms=parity.clock.now_ms() + 5_000)
        parity.clock.advance(4_999)
        assert (await parity.claim()).jobs == ()

    async def test_a_delayed_job_is_claimable_once_the_clock_reaches_its_run_at(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a delayed job is due once the clock reaches its `run_at`."""
        job = await parity.enqueue(run_at_ms=parity.clock.now_ms() + 5_000)
        assert (await parity.claim()).jobs == ()
        parity.clock.advance(5_000)
        assert (await parity.claim_one()).id == job.id

    async def test_the_payload_is_stored_in_its_json_form(self, parity: ParityEnv) -> None:
        """Rule: a payload is stored as JSON; reading it back gives the same JSON value."""
        job = parity.new_job(payload=json.dumps({"text": "héllo", "items": [1, 2.5, None, True]}))
        await parity.backend.jobs.enqueue([job])
        record = await parity.backend.jobs.get(job.id)
        assert record is not None
        assert json.loads(record.payload) == {"text": "héllo", "items": [1, 2.5, None, True]}
