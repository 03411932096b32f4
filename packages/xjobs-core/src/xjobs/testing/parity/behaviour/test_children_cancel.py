"""Parity: cancelling a parent cancels every live descendant that is not detached; `spawn` is
not waited for, and a detached child outlives its parent's cancel (issue 44, "Every failure
resolves")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from xjobs import App, JobContext, Retry, job
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
HOUR = timedelta(hours=1)


@job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE, retry=Retry(attempts=1))
async def napper(ctx: JobContext, input: Num) -> int:
    """A child that parks for an hour (live, waiting) before it answers."""
    await ctx.step.sleep("nap", HOUR)
    return input.n


async def _state(app: App, run_id: str, step: str, index: int) -> str:
    return (await app.get_job(child_id(run_id, step, index))).state


class TestCancelCascade:
    async def test_cancelling_a_parent_cancels_its_children_and_grandchildren(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a cancel reaches every live non-detached descendant, grandchildren included."""
        needs_children(parity)

        @job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE)
        async def middle(ctx: JobContext, input: Num) -> list[int]:
            return await ctx.step.map("leaves", napper, nums(2))

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            await ctx.step.map("middles", middle, nums(2))

        async with parity.app(jobs=[parent, middle, napper]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            parked = await app.get_job(result.job_id)
            middles = [child_id(parked.run_id, "middles", i) for i in range(2)]
            leaves = []
            for middle_id in middles:
                middle_run = (await app.get_job(middle_id)).run_id
                leaves += [child_id(middle_run, "leaves", i) for i in range(2)]
            before = [(await app.get_job(i)).state for i in middles + leaves]
            await app.cancel_job(result.job_id)
            after = [(await app.get_job(i)).state for i in middles + leaves]
        assert parked.state == "waiting"
        assert before == ["waiting"] * 6
        assert after == ["cancelled"] * 6

    async def test_a_spawned_child_is_cancelled_with_its_parent_unless_detached(
        self, parity: ParityEnv
    ) -> None:
        """Rule: spawn(detached=False) dies with the parent's cancel; spawn(detached=True) lives on."""
        needs_children(parity)
        spawned: list[str] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            spawned.append(await ctx.step.spawn("tied", napper, Num(n=1)))
            spawned.append(await ctx.step.spawn("free", napper, Num(n=2), detached=True))
            await ctx.step.sleep("hold", HOUR)

        async with parity.app(jobs=[parent, napper]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=QUEUES, until_idle=True)
            before = [(await app.get_job(i)).state for i in spawned]
            await app.cancel_job(result.job_id)
            after = [(await app.get_job(i)).state for i in spawned]
        assert before == ["waiting", "waiting"]
        assert after == ["cancelled", "waiting"]

    async def test_spawn_is_not_waited_for_and_answers_the_childs_id(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a spawned child runs on its own; the parent completes without waiting for it,
        and a replay answers the same id (nothing spawned twice)."""
        needs_children(parity)
        spawned: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=batch_key,
            queue=QUEUE,
            retry=Retry(attempts=2, base=timedelta(0), cap=timedelta(0)),
        )
        async def parent(ctx: JobContext, input: Batch) -> None:
            spawned.append(await ctx.step.spawn("later", napper, Num(n=7)))
            if ctx.attempt == 1:
                raise RuntimeError("crash after the spawn")

        async with parity.app(jobs=[parent, napper]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=[QUEUE], until_idle=True)
            record = await app.get_job(result.job_id)
            child = await app.get_job(spawned[0])
            run_id = record.run_id
        assert record.state == "completed"
        assert spawned == [child_id(run_id, "later", 0)] * 2
        assert child.state == "ready"
