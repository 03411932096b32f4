"""Parity: enqueue and the idempotency namespace (semantics.md, "Enqueue and idempotency")."""

from __future__ import annotations

import json

import pytest

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
        """Rule: the namespace (name, coalesce(tenant_id, ''), idempotency_key) is unique among live rows."""
        first = parity.new_job(idempotency_key="k1")
        second = parity.new_job(idempotency_key="k1")
        (a,) = await parity.backend.jobs.enqueue([first])
        (b,) = await parity.backend.jobs.enqueue([second])
        assert b.deduped is True
        assert (b.job_id, b.run_id) == (a.job_id, a.run_id)
        assert await parity.backend.jobs.get(second.id) is None

    async def test_the_payload_is_stored_in_its_json_form(self, parity: ParityEnv) -> None:
        """Rule: a payload is stored as JSON; reading it back gives the same JSON value."""
        job = parity.new_job(payload=json.dumps({"text": "héllo", "items": [1, 2.5, None, True]}))
        await parity.backend.jobs.enqueue([job])
        record = await parity.backend.jobs.get(job.id)
        assert record is not None
        assert json.loads(record.payload) == {"text": "héllo", "items": [1, 2.5, None, True]}
