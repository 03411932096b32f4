"""Parity: every failure of a child resolves its parent — fail-fast raises naming the child and
cancels the pending siblings, `return_exceptions` keeps each error in place, and a dead-lettered,
dropped or cancelled child ends the parent's wait (issue 44, "Every failure resolves")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xjobs import App, JobContext, Retry, job
from xjobs.errors import ChildFailedError
from xjobs.run.child_rows import child_id
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.family import (
    CHILD_QUEUE,
    Batch,
    Num,
    batch_key,
    needs_children,
    num_key,
    nums,
    org_of,
)
from xjobs.testing.parity.jobs import QUEUE

pytestmark = [pytest.mark.xjobs_parity]

ONE_TRY = Retry(attempts=1)
QUEUES = [QUEUE, CHILD_QUEUE]


class Boom(Exception):
    """A child's failure (its only attempt: it ends dead-lettered)."""


@job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE, retry=ONE_TRY)
async def flaky(ctx: JobContext, input: Num) -> int:
    """A child that fails when told to, and otherwise answers its number."""
    if input.fail:
        raise Boom(f"child {input.n} fails")
    return input.n


@job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE, retry=ONE_TRY)
async def slow(ctx: JobContext, input: Num) -> int:
    """A child that fails when told to; from 3 on it parks for an hour first (a pending sibling)."""
    if input.fail:
        raise Boom(f"child {input.n} fails")
    if input.n >= 3:
        await ctx.step.sleep("nap", timedelta(hours=1))
    return input.n


async def _children(app: App, parent_job_id: str, step: str, count: int) -> list[str]:
    run_id = (await app.get_job(parent_job_id)).run_id
    states: list[str] = []
    for index in range(count):
        states.append((await app.get_job(child_id(run_id, step, index))).state)
    return states


class TestFailFast:
    async def test_a_failed_child_raises_in_the_parent_naming_it(self, parity: ParityEnv) -> None:
        """Rule: by default the first child to end without a result fails the parent with
        XJOBS_CHILD_FAILED naming the child (for good: the child had its own retries)."""
        needs_children(parity)
        caught: list[ChildFailedError] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            try:
                await ctx.step.map("all", flaky, nums(4, failing=lambda n: n == 2))
            except ChildFailedError as exc:
                caught.append(exc)
                raise

        async with parity.app(jobs=[parent, flaky]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
        assert record.state == "dead"
        assert record.attempt == 1, "a child's failure is terminal for the parent"
        assert record.last_error is not None
        assert "XJOBS_CHILD_FAILED" in record.last_error
        (error,) = caught
        assert (error.step, error.index, error.state) == ("all", 2, "dead")
        assert error.last_error is not None
        assert "child 2 fails" in error.last_error

    async def test_the_pending_siblings_of_a_failed_child_are_cancelled(
        self, parity: ParityEnv
    ) -> None:
        """Rule: fail-fast cancels the siblings still pending when the failure is raised."""
        needs_children(parity)

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            await ctx.step.map("all", slow, nums(5, failing=lambda n: n == 2))

        async with parity.app(jobs=[parent, slow]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(
                queues=QUEUES, until_idle=True, concurrency={QUEUE: 1, CHILD_QUEUE: 1}
            )
            states = await _children(app, result.job_id, "all", 5)
            record = await app.get_job(result.job_id)
        assert record.state == "dead"
        assert states == ["completed", "completed", "dead", "cancelled", "cancelled"]


class TestReturnExceptions:
    async def test_each_failed_childs_error_stands_in_its_place(self, parity: ParityEnv) -> None:
        """Rule: with return_exceptions=True every child runs to its end and each failed one's
        ChildFailedError stands in its place; the parent goes on."""
        needs_children(parity)
        seen: list[list[object]] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            inputs = nums(5, failing=lambda n: n in (1, 3))
            seen.append(await ctx.step.map("all", flaky, inputs, return_exceptions=True))

        async with parity.app(jobs=[parent, flaky]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
        assert record.state == "completed"
        (results,) = seen
        assert [r for r in results if not isinstance(r, ChildFailedError)] == [0, 2, 4]
        errors = [r for r in results if isinstance(r, ChildFailedError)]
        assert [(e.index, e.state) for e in errors] == [(1, "dead"), (3, "dead")]
        assert results[1] is errors[0]
        assert results[3] is errors[1]


class TestEveryFailureResolves:
    async def test_a_dropped_child_resolves_its_parent(self, parity: ParityEnv) -> None:
        """Rule: a child failed for good without a dead letter (dropped) resolves its parent."""
        needs_children(parity)
        caught: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=num_key,
            queue=CHILD_QUEUE,
            retry=Retry(attempts=1, dead_letter=False),
        )
        async def dropper(ctx: JobContext, input: Num) -> None:
            raise Boom("dropped")

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            try:
                await ctx.step.invoke("one", dropper, Num())
            except ChildFailedError as exc:
                caught.append(exc.state)

        async with parity.app(jobs=[parent, dropper]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, caught) == ("completed", ["failed"])

    async def test_a_cancelled_child_resolves_its_parent(self, parity: ParityEnv) -> None:
        """Rule: an operator's cancel of a child resolves its waiting parent."""
        needs_children(parity)
        caught: list[str] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            try:
                await ctx.step.invoke("one", slow, Num(n=5))
            except ChildFailedError as exc:
                caught.append(exc.state)

        async with parity.app(jobs=[parent, slow]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            waiting = await app.get_job(result.job_id)
            await app.cancel_job(child_id(waiting.run_id, "one", 0))
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
        assert waiting.state == "waiting"
        assert (record.state, caught) == ("completed", ["cancelled"])


class TestRetryWhatFailed:
    async def test_a_parent_requeued_after_its_failed_child_reads_every_result(
        self, parity: ParityEnv
    ) -> None:
        """Rule: requeue the failed child, then the parent: the parent's replay reads the child's
        new ending (not the count of its first one) and continues with every result."""
        needs_children(parity)
        failures: list[int] = []
        seen: list[list[int]] = []

        @job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE, retry=ONE_TRY)
        async def once(ctx: JobContext, input: Num) -> int:
            if input.n == 1 and not failures:
                failures.append(input.n)
                raise Boom("the first run of child 1 fails")
            return input.n * 10

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            seen.append(await ctx.step.map("all", once, nums(2)))

        async with parity.app(jobs=[parent, once]) as app:
            result = await parent.enqueue(Batch())
            one_at_a_time = {QUEUE: 1, CHILD_QUEUE: 1}  # child 1 ends last: no sibling cancelled
            await app.run_worker(queues=QUEUES, until_idle=True, concurrency=one_at_a_time)
            failed = await app.get_job(result.job_id)
            await app.requeue_job(child_id(failed.run_id, "all", 1))
            await app.run_worker(queues=QUEUES, until_idle=True)
            await app.requeue_job(result.job_id)
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
        assert failed.state == "dead"
        assert (record.state, seen) == ("completed", [[0, 10]])
