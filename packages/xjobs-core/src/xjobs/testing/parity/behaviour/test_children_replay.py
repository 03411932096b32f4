"""Parity: children are durable steps — a replayed or retried parent spawns nothing twice, a
replay that asks for other children is refused, and a child of another tenant is refused with
nothing written (issue 44, "Children from inside a body, as durable steps")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xjobs import JobContext, Retry, job
from xjobs.errors import ChildrenInvalidError, ChildTenantMismatchError
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

QUEUES = [QUEUE, CHILD_QUEUE]
TWICE = Retry(attempts=2, base=timedelta(0), cap=timedelta(0))


class TestReplay:
    async def test_a_retried_parent_spawns_nothing_twice(self, parity: ParityEnv) -> None:
        """Rule: a child's id derives from the run, the step and its index: the retry of a parent
        that mapped three children reads the same three back, and none runs twice."""
        needs_children(parity)
        ran: list[int] = []
        seen: list[list[int]] = []

        @job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE)
        async def counted(ctx: JobContext, input: Num) -> int:
            ran.append(input.n)
            return input.n + 100

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE, retry=TWICE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            seen.append(await ctx.step.map("three", counted, nums(3)))
            if ctx.attempt == 1:
                raise RuntimeError("crash after the fan-in")

        async with parity.app(jobs=[parent, counted]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
            family = await app.backend.children.family(result.job_id)  # type: ignore[union-attr]
        assert (record.state, record.attempt) == ("completed", 2)
        assert sorted(ran) == [0, 1, 2]
        assert seen == [[100, 101, 102], [100, 101, 102]]
        assert family is not None
        assert dict(family.children) == {"completed": 3}

    async def test_a_replay_asking_for_other_children_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a step's children are the same on every replay; another count is
        XJOBS_CHILDREN_INVALID (terminal), and nothing more is spawned."""
        needs_children(parity)
        refused: list[ChildrenInvalidError] = []

        @job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE)
        async def kid(ctx: JobContext, input: Num) -> int:
            return input.n

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE, retry=TWICE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            try:
                await ctx.step.map("kids", kid, nums(2 + ctx.attempt))
            except ChildrenInvalidError as exc:
                refused.append(exc)
                raise
            raise RuntimeError("retry me")

        async with parity.app(jobs=[parent, kid]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
            family = await app.backend.children.family(result.job_id)  # type: ignore[union-attr]
        assert (record.state, record.attempt, len(refused)) == ("dead", 2, 1)
        assert family is not None
        assert sum(family.children.values()) == 3


class TestTenancy:
    async def test_a_child_of_another_org_is_refused_with_nothing_written(
        self, parity: ParityEnv
    ) -> None:
        """Rule: children inherit the parent's tenant: a child of another org is
        XJOBS_CHILD_TENANT_MISMATCH before any child is written (even the ones of its own org)."""
        needs_children(parity)
        refused: list[ChildTenantMismatchError] = []

        @job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE)
        async def kid(ctx: JobContext, input: Num) -> int:
            return input.n

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            mixed = [Num(org="org-1", n=0), Num(org="org-2", n=1)]
            try:
                await ctx.step.map("mixed", kid, mixed)
            except ChildTenantMismatchError as exc:
                refused.append(exc)
                raise

        async with parity.app(jobs=[parent, kid]) as app:
            result = await parent.enqueue(Batch(org="org-1"))
            await app.run_worker(queues=QUEUES, until_idle=True)
            record = await app.get_job(result.job_id)
            family = await app.backend.children.family(result.job_id)  # type: ignore[union-attr]
            first = await app.backend.jobs.get(child_id(record.run_id, "mixed", 0))
            steps = await app.get_steps(result.job_id)
        assert (record.state, record.attempt, len(refused)) == ("dead", 1, 1)
        assert family is not None
        assert dict(family.children) == {}
        assert first is None
        assert [s.name for s in steps] == []

    async def test_an_untenanted_child_of_a_tenanted_parent_is_refused(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a tenant="none" child would act across orgs: a tenanted parent may not spawn it."""
        needs_children(parity)
        refused: list[str] = []

        @job(tenant="none", idempotency_key=num_key, queue=CHILD_QUEUE)
        async def anyone(ctx: JobContext, input: Num) -> int:
            return input.n

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            try:
                await ctx.step.invoke("one", anyone, Num())
            except ChildTenantMismatchError as exc:
                refused.append(exc.code)

        async with parity.app(jobs=[parent, anyone]) as app:
            await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
        assert refused == ["XJOBS_CHILD_TENANT_MISMATCH"]
