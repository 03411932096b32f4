"""Parity: child jobs answer their results to the parent — `invoke`, `map` in input order, a
1,000-child map, a parent and its children on a queue of one slot (issue 44, "Workflows")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from xjobs import App, JobContext, Retry, job
from xjobs.contract.children import MAX_CHILDREN_PAGE, ChildRow, ChildStore
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


@job(tenant=org_of, idempotency_key=num_key, queue=CHILD_QUEUE, retry=ONE_TRY)
async def square(ctx: JobContext, input: Num) -> int:
    """A child: its number squared."""
    return input.n * input.n


class CountingPages:
    """A child store that records the size of every page of children read from the real one."""

    def __init__(self, inner: ChildStore) -> None:
        self.inner = inner
        self.pages: list[int] = []

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        page = await self.inner.children_page(parent_run_id, step, after_index, limit)
        self.pages.append(len(page))
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class TestMap:
    async def test_map_answers_the_results_in_input_order(self, parity: ParityEnv) -> None:
        """Rule: `map` answers its children's results in the order of its inputs."""
        needs_children(parity)
        seen: list[list[int]] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> int:
            results = await ctx.step.map("squares", square, nums(input.count))
            seen.append(results)
            return sum(results)

        async with parity.app(jobs=[parent, square]) as app:
            result = await parent.enqueue(Batch(count=7))
            await app.run_worker(queues=[QUEUE, CHILD_QUEUE], until_idle=True)
            record = await app.get_job(result.job_id)
            total = await result.result()
        assert record.state == "completed"
        assert seen == [[n * n for n in range(7)]]
        assert total == sum(n * n for n in range(7))

    async def test_invoke_answers_the_one_childs_result(self, parity: ParityEnv) -> None:
        """Rule: `invoke` enqueues one child, parks, and answers its result."""
        needs_children(parity)
        seen: list[int] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            seen.append(await ctx.step.invoke("one", square, Num(n=12)))

        async with parity.app(jobs=[parent, square]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=[QUEUE, CHILD_QUEUE], until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, seen) == ("completed", [144])

    async def test_a_map_of_no_inputs_answers_an_empty_list_and_spawns_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an empty fan-out resolves at once: nothing to wait for, the parent never parks."""
        needs_children(parity)
        seen: list[list[int]] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            seen.append(await ctx.step.map("none", square, []))

        async with parity.app(jobs=[parent, square]) as app:
            await parent.enqueue(Batch())
            stats = await app.run_worker(queues=[QUEUE, CHILD_QUEUE], until_idle=True)
        assert seen == [[]]
        assert stats.as_dict()["completed"] == 1

    async def test_a_thousand_children_are_mapped_and_read_back_in_pages(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a fan-out is written in pages and read back with a cursor, every result in place."""
        needs_children(parity)
        seen: list[list[int]] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            seen.append(await ctx.step.map("many", square, nums(input.count)))

        async with parity.app(jobs=[parent, square]) as app:
            await parent.enqueue(Batch(count=1000))
            await app.run_worker(
                queues=[QUEUE, CHILD_QUEUE],
                until_idle=True,
                concurrency={QUEUE: 1, CHILD_QUEUE: 50},
            )
        assert seen == [[n * n for n in range(1000)]]

    async def test_a_parent_and_its_ten_children_run_to_the_end_on_one_slot(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a parked parent holds no worker slot: one slot runs the parent, its ten children,
        then the parent's continuation (no slot deadlock)."""
        needs_children(parity)
        order: list[str] = []

        @job(tenant=org_of, idempotency_key=num_key, queue=QUEUE)
        async def kid(ctx: JobContext, input: Num) -> int:
            order.append(f"kid-{input.n}")
            return input.n

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            order.append("parent")
            results = await ctx.step.map("kids", kid, nums(10))
            order.append(f"continued-{sum(results)}")

        async with parity.app(jobs=[parent, kid]) as app:
            result = await parent.enqueue(Batch())
            await app.run_worker(queues=[QUEUE], until_idle=True, concurrency={QUEUE: 1})
            record = await app.get_job(result.job_id)
        assert record.state == "completed"
        assert order[0] == "parent"
        assert order[-1] == "continued-45"
        assert sorted(o for o in order if o.startswith("kid-")) == sorted(
            f"kid-{n}" for n in range(10)
        )

    async def test_map_iter_reads_a_large_fan_out_one_page_at_a_time(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the parent's memory is bounded by a page: `map_iter` yields every result in
        input order from pages of at most MAX_CHILDREN_PAGE children."""
        needs_children(parity)
        count = MAX_CHILDREN_PAGE + 200
        seen: list[int] = []

        @job(tenant=org_of, idempotency_key=batch_key, queue=QUEUE)
        async def parent(ctx: JobContext, input: Batch) -> None:
            async for result in ctx.step.map_iter("many", square, nums(input.count)):
                seen.append(result)

        store = parity.backend.children
        assert store is not None
        counting = CountingPages(store)
        backend = replace(parity.backend, children=counting)
        async with App(backend, jobs=[parent, square], clock=parity.clock, retention=None) as app:
            await parent.enqueue(Batch(count=count))
            await app.run_worker(
                queues=[QUEUE, CHILD_QUEUE],
                until_idle=True,
                concurrency={QUEUE: 1, CHILD_QUEUE: 50},
            )
        assert seen == [n * n for n in range(count)]
        assert max(counting.pages) <= MAX_CHILDREN_PAGE
        assert counting.pages.count(MAX_CHILDREN_PAGE) >= 1
