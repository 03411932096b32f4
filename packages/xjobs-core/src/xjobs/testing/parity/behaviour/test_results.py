"""Parity: what a job body returns, stored with its completion and read back (issue: results)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import BaseModel

from xjobs import JobContext, Retry, job
from xjobs.contract.driver import Claim
from xjobs.errors import (
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    ResultTimeoutError,
)
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, Item, key_of, org_of, within

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("results")]

SHORT = timedelta(milliseconds=200)


class Receipt(BaseModel):
    """What the scenario job returns."""

    total_cents: int
    lines: list[str]


class TestResults:
    async def test_a_returned_model_is_read_back_as_the_model(self, parity: ParityEnv) -> None:
        """Rule: the result is decoded through the body's return annotation."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> Receipt:
            return Receipt(total_cents=1250, lines=[input.key])

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item(key="a"))
            await app.run_worker(lease=LEASE, until_idle=True)
            value = await body.result(enqueued.job_id, timeout=SHORT)
            again = await enqueued.result(timeout=SHORT)
        assert value == again == Receipt(total_cents=1250, lines=["a"])

    async def test_a_json_value_is_read_back_as_json(self, parity: ParityEnv) -> None:
        """Rule: anything the codec stores round-trips: JSON values without an annotation."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item):  # type: ignore[no-untyped-def]
            return {"n": [1, 2.5, "x", None, True]}

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            assert await enqueued.result(timeout=SHORT) == {"n": [1, 2.5, "x", None, True]}

    async def test_a_body_returning_none_stores_nothing(self, parity: ParityEnv) -> None:
        """Rule: `None` is no result: the completion is a plain ack."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            assert await enqueued.result(timeout=SHORT) is None
            stored = await parity.backend.results.read(enqueued.job_id)  # type: ignore[union-attr]
        assert stored is not None
        assert (stored.state, stored.result) == ("completed", None)

    async def test_a_waiter_gets_the_result_when_the_job_settles(self, parity: ParityEnv) -> None:
        """Rule: a waiter started before the run learns of the settle (no result is lost)."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> int:
            return 42

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            waiting = asyncio.create_task(
                body.result(enqueued.job_id, timeout=timedelta(seconds=5))
            )
            await asyncio.sleep(0.05)
            await app.run_worker(lease=LEASE, until_idle=True)
            assert await within(waiting, what="the waiter") == 42

    async def test_a_dead_job_raises_job_failed_with_its_last_error(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a job that died raises XJOBS_JOB_FAILED with the last attempt's class and message."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=1))
        async def body(ctx: JobContext, input: Item) -> int:
            raise KeyError("no such order")

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            with pytest.raises(JobFailedError) as failed:
                await enqueued.result(timeout=SHORT)
        assert failed.value.code == "XJOBS_JOB_FAILED"
        assert (failed.value.error_class, failed.value.error_message) == (
            "KeyError",
            "'no such order'",
        )

    async def test_a_cancelled_job_raises_cancelled(self, parity: ParityEnv) -> None:
        """Rule: a cancelled job has no result: XJOBS_JOB_CANCELLED."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> int:
            return 1

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.cancel_job(enqueued.job_id)
            with pytest.raises(JobCancelledError):
                await enqueued.result(timeout=SHORT)

    async def test_no_answer_in_time_is_a_timeout(self, parity: ParityEnv) -> None:
        """Rule: no settle within the timeout raises XJOBS_RESULT_TIMEOUT, a TimeoutError."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> int:
            return 1

        async with parity.app([body]):
            enqueued = await body.enqueue(Item())
            with pytest.raises(ResultTimeoutError) as late:
                await enqueued.result(timeout=timedelta(milliseconds=50))
        assert isinstance(late.value, TimeoutError)
        assert late.value.code == "XJOBS_RESULT_TIMEOUT"

    async def test_an_unknown_id_is_not_found(self, parity: ParityEnv) -> None:
        """Rule: the result of an unknown id is XJOBS_JOB_NOT_FOUND."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> int:
            return 1

        async with parity.app([body]):
            with pytest.raises(JobNotFoundError):
                await body.result(parity.new_job().id, timeout=SHORT)

    async def test_a_result_over_its_bound_settles_the_job_dead(self, parity: ParityEnv) -> None:
        """Rule: a result over `result_max_bytes` is never truncated: the job settles dead."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, result_max_bytes=64)
        async def body(ctx: JobContext, input: Item) -> str:
            return "x" * 100

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            record = await app.get_job(enqueued.job_id)
            with pytest.raises(JobFailedError):
                await enqueued.result(timeout=SHORT)
        assert record.state == "dead"
        assert record.last_error is not None
        assert "XJOBS_RESULT_INVALID" in record.last_error

    async def test_a_requeued_job_forgets_its_old_result(self, parity: ParityEnv) -> None:
        """Rule: a requeue starts the job afresh: the earlier result is gone until it completes."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> int:
            return 7

        async with parity.app([body]) as app:
            enqueued = await body.enqueue(Item())
            await app.run_worker(lease=LEASE, until_idle=True)
            await app.requeue_job(enqueued.job_id)
            stored = await parity.backend.results.read(enqueued.job_id)  # type: ignore[union-attr]
        assert stored is not None
        assert (stored.state, stored.result) == ("ready", None)


class TestCompleteIsFenced:
    async def test_a_completion_by_another_worker_stores_nothing(self, parity: ParityEnv) -> None:
        """Rule: `complete` is fenced exactly like `ack`: a wrong claim writes no result."""
        await parity.enqueue()
        claimed = await parity.claim_one(worker_id="worker-a")
        intruder = Claim(job_id=claimed.id, worker_id="worker-b", claims=claimed.claims)
        results = parity.backend.results
        assert results is not None
        assert await results.complete(intruder, '"stolen"') is False
        assert await results.complete(claimed.claim, '"mine"') is True
        stored = await results.read(claimed.id)
        assert stored is not None
        assert (stored.state, stored.result) == ("completed", '"mine"')
