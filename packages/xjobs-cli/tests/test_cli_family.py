"""`xjobs jobs show`'s family: a parent's children counted by state, a child's parent, nothing
for a job outside any workflow (issue 44)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job
from xjobs.run.child_rows import child_id
from xjobs_cli.family_view import family_lines, family_of


class Kid(BaseModel):
    n: int


class Parent(BaseModel):
    count: int


@job(tenant="none", idempotency_key=lambda i: str(i.n), queue="kids")
async def kid(ctx: JobContext, input: Kid) -> int:
    return input.n


@job(tenant="none", idempotency_key=lambda i: str(i.count))
async def parent(ctx: JobContext, input: Parent) -> None:
    await ctx.step.map("kids", kid, [Kid(n=n) for n in range(input.count)])


@pytest.mark.asyncio
async def test_a_waiting_parent_shows_its_children_by_state_and_a_child_its_parent() -> None:
    async with xjobs.App(backend="memory://", jobs=[parent, kid]) as app:
        sent = await parent.enqueue(Parent(count=3))
        await app.run_worker(queues=["default"], until_idle=True)
        record = await app.get_job(sent.job_id)
        first = child_id(record.run_id, "kids", 0)
        shown = family_lines(await family_of(app, sent.job_id))
        child = family_lines(await family_of(app, first))
    assert shown == ["children (3): 3 ready"]
    assert child == [f"parent: {sent.job_id}"]


@pytest.mark.asyncio
async def test_a_job_outside_any_workflow_shows_no_family_line() -> None:
    async with xjobs.App(backend="memory://", jobs=[kid]) as app:
        sent = await kid.enqueue(Kid(n=1))
        family = await family_of(app, sent.job_id)
    assert family == {"parent_id": None, "children": {}}
    assert family_lines(family) == []
