"""What only Redis has of child jobs: a child's ending crosses from its queue's slot to its
group's and its parent's in steps, and one a killed process left between them is delivered by the
sweep, exactly once."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.children import ChildGroup, ChildStore
from xjobs.contract.driver import ClaimedJob, ClaimOptions, NewJob
from xjobs.run.child_rows import child_id
from xjobs.run.settle import parking
from xjobs.testing import rows
from xjobs_redis.backend import open_backend
from xjobs_redis.calls import children as child_calls
from xjobs_redis.calls import jobs as job_calls
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys

pytestmark = pytest.mark.asyncio

PARENTS, KIDS = "parents", "kids"
LEASE_MS = 30_000
STEP = "fan"


def new_job(queue: str, **overrides: Any) -> NewJob:
    return rows.new_job(**{"name": "family_job", "queue": queue, **overrides})


async def claim_one(backend: Backend, queue: str) -> ClaimedJob:
    (claimed,) = (await backend.jobs.claim(ClaimOptions("w-1", {queue: 1}, LEASE_MS))).jobs
    return claimed


def children_of(backend: Backend) -> ChildStore:
    assert backend.children is not None
    return backend.children


async def test_an_ending_cut_between_its_steps_is_delivered_by_the_sweep_exactly_once(
    manual_backend: Backend, client: Redis, prefix: str, clock: ManualClock
) -> None:
    backend, keys = manual_backend, Keys(prefix)
    children = children_of(backend)
    await backend.jobs.enqueue([new_job(PARENTS)])
    parent = await claim_one(backend, PARENTS)
    group = ChildGroup(parent.id, parent.run_id, PARENTS, STEP, 2, True, True)
    kids = [
        new_job(KIDS, id=child_id(parent.run_id, STEP, i), idempotency_key=f"child:{i}")
        for i in range(2)
    ]
    assert await children.spawn(parent.claim, group, 0, kids) == 2
    assert await children.park(parent.claim, parent.run_id, STEP, parking(2**50))
    first, second = await claim_one(backend, KIDS), await claim_one(backend, KIDS)
    assert await backend.jobs.ack(first.claim)  # delivered in full

    # the second child's ack lands, and its process dies before it delivers the ending
    executor = Executor(client, clock)
    await executor.load()
    ack = job_calls.ack(keys, now=executor.now(), queue=KIDS, claim=second.claim)
    assert await executor.run(ack) == 2  # the ending recorded in the child's own slot
    # ... or after its group counted it, before the parent's wake and the ending's drop
    end = child_calls.child_end(
        keys, parent_run_id=parent.run_id, step=STEP, child_id=second.id, index=1,
        state="completed",
    )  # fmt: skip
    assert (await executor.run(end))[0] == 1  # the group resolved: the parent is to be woken
    assert await client.hget(keys.job(PARENTS, parent.id), "state") == "waiting"
    assert await client.hkeys(keys.child_endings(KIDS)) == [second.id]

    assert isinstance(backend.jobs, RedisJobDriver)
    assert await backend.jobs.endings.sweep() == 1
    assert await backend.jobs.endings.sweep() == 0  # delivered once, dropped
    state = await children.group(parent.run_id, STEP)
    assert state is not None
    assert (state.ended, state.failed, state.resolved) == (2, 0, True)  # counted once
    woken = await claim_one(backend, PARENTS)
    assert woken.id == parent.id
    assert (await backend.jobs.claim(ClaimOptions("w-2", {PARENTS: 1}, LEASE_MS))).jobs == ()


async def test_an_ending_left_by_a_killed_process_is_delivered_by_a_claim_pass(
    manual_backend: Backend, client: Redis, url: str, prefix: str, clock: ManualClock
) -> None:
    """No purge runs: a worker's claim pass on the child's queue delivers the ending a killed
    process recorded and never carried on, and the parked parent is woken (it hung before)."""
    backend, keys = manual_backend, Keys(prefix)
    children = children_of(backend)
    await backend.jobs.enqueue([new_job(PARENTS)])
    parent = await claim_one(backend, PARENTS)
    group = ChildGroup(parent.id, parent.run_id, PARENTS, STEP, 1, True, True)
    kid = new_job(KIDS, id=child_id(parent.run_id, STEP, 0), idempotency_key="child:0")
    assert await children.spawn(parent.claim, group, 0, [kid]) == 1
    assert await children.park(parent.claim, parent.run_id, STEP, parking(2**50))
    only = await claim_one(backend, KIDS)
    executor = Executor(client, clock)
    await executor.load()
    ack = job_calls.ack(keys, now=executor.now(), queue=KIDS, claim=only.claim)
    assert await executor.run(ack) == 2  # recorded; the process dies before delivering it

    worker = await open_backend(url, clock=clock, prefix=prefix)  # another worker's process
    try:
        idle = await worker.jobs.claim(ClaimOptions("w-2", {KIDS: 1}, LEASE_MS))
        assert idle.jobs == ()
        assert await client.hkeys(keys.child_endings(KIDS)) == []
        woken = await claim_one(worker, PARENTS)
    finally:
        await worker.close()
    assert woken.id == parent.id


async def test_a_group_lives_in_a_slot_of_its_own_beside_its_childrens_queue(
    prefix: str,
) -> None:
    keys = Keys(prefix)
    run = "0190a0b0-0000-7000-8000-000000000001"
    tags = {keys.group(run, STEP).split("}")[0], keys.job(KIDS, "c").split("}")[0]}
    assert tags == {f"{prefix}:{{{prefix}:grp:{run}", f"{prefix}:{{{prefix}:{KIDS}"}
    assert keys.group_members(run, STEP).startswith(f"{prefix}:{{{prefix}:grp:{run}}}")
