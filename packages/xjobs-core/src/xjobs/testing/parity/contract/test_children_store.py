"""Parity: the `ChildStore` contract, called directly — the fenced spawn, a replayed page written
once, the group resolved inside each child's ending (counted once), the parent parked and woken
once, the "children ended before the park" race, the cursor, the cancels (contract/children.py)."""

from __future__ import annotations

import pytest

from xjobs.contract.children import ChildGroup, ChildStore
from xjobs.contract.driver import WAIT_FOREVER_MS, ClaimedJob, NewJob
from xjobs.run.child_rows import child_id
from xjobs.run.settle import ending, parking
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.family import needs_children
from xjobs.testing.parity.jobs import reclaim_lapsed

pytestmark = [pytest.mark.xjobs_parity]

PARENTS = "parity"
KIDS = "parity-kids"


def _store(parity: ParityEnv) -> ChildStore:
    needs_children(parity)
    store = parity.backend.children
    assert store is not None
    return store


def _group(
    parent: ClaimedJob, step: str = "fan", total: int = 2, *, wait: bool = True, **over: bool
) -> ChildGroup:
    return ChildGroup(
        parent.id,
        parent.run_id,
        parent.queue,
        step,
        total,
        wait,
        over.get("fail_fast", False),
        over.get("detached", False),
    )


def _rows(
    parity: ParityEnv, group: ChildGroup, first: int, count: int, **over: object
) -> list[NewJob]:
    rows = []
    for index in range(first, first + count):
        job_id = child_id(group.parent_run_id, group.step, index)
        row = parity.new_job(id=job_id, queue=KIDS, idempotency_key=f"child:{job_id}", **over)
        rows.append(row)
    return rows


async def _parent(parity: ParityEnv) -> ClaimedJob:
    await parity.enqueue(queue=PARENTS)
    return await parity.claim_one(PARENTS)


async def _spawned(
    parity: ParityEnv, store: ChildStore, parent: ClaimedJob, group: ChildGroup, **over: object
) -> None:
    assert (
        await store.spawn(parent.claim, group, 0, _rows(parity, group, 0, group.total, **over))
        == group.total
    )


async def _park(
    parity: ParityEnv, store: ChildStore, parent: ClaimedJob, step: str = "fan"
) -> None:
    assert await store.park(parent.claim, parent.run_id, step, parking(WAIT_FOREVER_MS))


async def _finish_kids(parity: ParityEnv, count: int) -> None:
    for _ in range(count):
        kid = await parity.claim_one(KIDS)
        assert await parity.backend.jobs.ack(kid.claim)


async def _claimable_parent(parity: ParityEnv) -> list[str]:
    return [j.id for j in (await parity.claim({PARENTS: 5})).jobs]


class TestSpawn:
    async def test_a_spawn_under_a_claim_that_moved_on_writes_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a spawn is fenced on the parent's claim, as a step write is."""
        store = _store(parity)
        parent = await _parent(parity)
        group = _group(parent)
        stale = parent.claim.__class__(parent.id, "another-worker", parent.claims, parent.queue)
        assert await store.spawn(stale, group, 0, _rows(parity, group, 0, 2)) is None
        assert await store.group(parent.run_id, "fan") is None
        assert await parity.backend.jobs.get(child_id(parent.run_id, "fan", 0)) is None

    async def test_a_spawn_after_the_parent_was_cancelled_writes_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a child being spawned while its parent is cancelled is never left alive."""
        store = _store(parity)
        parent = await _parent(parity)
        await parity.cancel(parent.id)
        group = _group(parent)
        assert await store.spawn(parent.claim, group, 0, _rows(parity, group, 0, 2)) is None
        assert await parity.backend.jobs.get(child_id(parent.run_id, "fan", 0)) is None

    async def test_a_replayed_page_is_written_once(self, parity: ParityEnv) -> None:
        """Rule: a child's id is its place: the same page spawned again adds nothing."""
        store = _store(parity)
        parent = await _parent(parity)
        group = _group(parent, total=3)
        assert await store.spawn(parent.claim, group, 0, _rows(parity, group, 0, 2)) == 2
        assert await store.spawn(parent.claim, group, 0, _rows(parity, group, 0, 2)) == 2
        assert await store.spawn(parent.claim, group, 2, _rows(parity, group, 2, 1)) == 3
        family = await store.family(parent.id)
        state = await store.group(parent.run_id, "fan")
        assert family is not None
        assert dict(family.children) == {"ready": 3}
        assert state is not None
        assert (state.total, state.spawned, state.ended) == (3, 3, 0)

    async def test_the_cursor_reads_the_children_a_page_at_a_time_in_index_order(
        self, parity: ParityEnv
    ) -> None:
        """Rule: results are read with a cursor (the last index read), never all at once."""
        store = _store(parity)
        parent = await _parent(parity)
        group = _group(parent, total=5)
        await _spawned(parity, store, parent, group)
        pages, after = [], -1
        while True:
            page = await store.children_page(parent.run_id, "fan", after, 2)
            if not page:
                break
            pages.append([row.index for row in page])
            after = page[-1].index
        assert pages == [[0, 1], [2, 3], [4]]
        first = (await store.children_page(parent.run_id, "fan", -1, 1))[0]
        assert (first.job_id, first.state) == (child_id(parent.run_id, "fan", 0), "ready")


class TestResolution:
    async def test_the_last_childs_ending_wakes_the_parked_parent_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the parent parks holding nothing, and the ending that resolves its group makes it
        due; the endings before it do not."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent))
        await _park(parity, store, parent)
        assert (await parity.record(parent.id)).state == "waiting"
        await _finish_kids(parity, 1)
        assert await _claimable_parent(parity) == []
        await _finish_kids(parity, 1)
        state = await store.group(parent.run_id, "fan")
        assert state is not None
        assert (state.ended, state.failed, state.resolved) == (2, 0, True)
        assert await _claimable_parent(parity) == [parent.id]

    async def test_children_that_ended_before_the_park_leave_the_parent_due_at_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the race "every child finished before the parent parked": the park answers due now."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent))
        await _finish_kids(parity, 2)
        await _park(parity, store, parent)
        record = await parity.record(parent.id)
        assert (record.state, record.run_at_ms <= parity.clock.now_ms()) == ("waiting", True)
        assert await _claimable_parent(parity) == [parent.id]

    async def test_a_fail_fast_group_resolves_at_its_first_failure(self, parity: ParityEnv) -> None:
        """Rule: fail-fast resolves at the first child that ends without a result."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, total=3, fail_fast=True))
        await _park(parity, store, parent)
        kid = await parity.claim_one(KIDS)
        assert await parity.backend.jobs.nack(kid.claim, ending(True, "boom"))
        state = await store.group(parent.run_id, "fan")
        assert state is not None
        assert (state.ended, state.failed, state.resolved) == (1, 1, True)
        assert state.first_failed == 0
        assert await _claimable_parent(parity) == [parent.id]

    async def test_a_buried_child_resolves_its_parent(self, parity: ParityEnv) -> None:
        """Rule: a child whose lease lapsed on its final attempt is buried, and that resolves."""
        store = _store(parity)
        parent = await _parent(parity)
        group = _group(parent, total=1)
        await _spawned(parity, store, parent, group, max_attempts=1)
        await _park(parity, store, parent)
        await parity.claim_one(KIDS, lease_ms=1_000)
        parity.clock.advance(1_001)
        buried = await parity.claim({KIDS: 1}, worker_id="worker-b")
        assert [b.id for b in buried.buried] == [child_id(parent.run_id, "fan", 0)]
        state = await store.group(parent.run_id, "fan")
        assert state is not None
        assert (state.ended, state.failed, state.resolved) == (1, 1, True)
        assert parent.id in await _claimable_parent(parity)

    async def test_a_child_counts_once_however_often_it_ends(self, parity: ParityEnv) -> None:
        """Rule: a requeued child that ends again moves no count (no second wake, no drift)."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, total=2))
        kid = await parity.claim_one(KIDS)
        assert await parity.backend.jobs.nack(kid.claim, ending(True, "boom"))
        await parity.requeue(kid.id)
        again = await parity.claim_one(KIDS)
        assert again.id == kid.id
        assert await parity.backend.jobs.ack(again.claim)
        state = await store.group(parent.run_id, "fan")
        assert state is not None
        assert (state.ended, state.failed, state.resolved) == (1, 1, False)

    async def test_a_group_not_waited_for_never_resolves(self, parity: ParityEnv) -> None:
        """Rule: spawned children (wait=False) only carry their link: no resolution, no wake."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, total=1, wait=False))
        await _finish_kids(parity, 1)
        state = await store.group(parent.run_id, "fan")
        assert state is not None
        assert (state.ended, state.resolved) == (1, False)

    async def test_a_parent_whose_worker_died_before_its_park_is_woken_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a worker killed mid-fan-in never makes the parent continue twice or never: the
        next claim replays the spawn (nothing new), the dead claim's park misses its fence, and
        the last child's ending makes the parent due once."""
        store = _store(parity)
        await parity.enqueue(queue=PARENTS)
        dead = await parity.claim_one(PARENTS, lease_ms=1_000)
        group = _group(dead)
        await _spawned(parity, store, dead, group)
        alive = await reclaim_lapsed(parity, PARENTS, lease_ms=1_000)
        assert alive.id == dead.id
        replayed = await store.spawn(alive.claim, group, 0, _rows(parity, group, 0, 2))
        assert replayed == 2
        assert not await store.park(dead.claim, dead.run_id, "fan", parking(WAIT_FOREVER_MS))
        await _park(parity, store, alive)
        await _finish_kids(parity, 2)
        family = await store.family(dead.id)
        assert family is not None
        assert dict(family.children) == {"completed": 2}
        assert await _claimable_parent(parity) == [dead.id]
        assert await _claimable_parent(parity) == []


class TestCancel:
    async def test_cancel_children_stops_the_live_siblings_only(self, parity: ParityEnv) -> None:
        """Rule: a fail-fast parent cancels the group's live children; ended ones keep their state."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, total=3))
        await _finish_kids(parity, 1)
        assert await store.cancel_children(parent.claim, parent.run_id, "fan") == 2
        states = [(await parity.record(child_id(parent.run_id, "fan", i))).state for i in range(3)]
        assert states == ["completed", "cancelled", "cancelled"]

    async def test_a_parents_cancel_stops_at_a_detached_child(self, parity: ParityEnv) -> None:
        """Rule: a cancel reaches the live children that are not detached; a detached one lives."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, "tied", total=1, wait=False))
        free = _group(parent, "free", total=1, wait=False, detached=True)
        await _spawned(parity, store, parent, free)
        await parity.cancel(parent.id)
        tied_state = (await parity.record(child_id(parent.run_id, "tied", 0))).state
        free_state = (await parity.record(child_id(parent.run_id, "free", 0))).state
        assert (tied_state, free_state) == ("cancelled", "ready")

    async def test_the_family_names_the_parent_and_counts_the_children_by_state(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an operator sees a job's parent and its children counted by state."""
        store = _store(parity)
        parent = await _parent(parity)
        await _spawned(parity, store, parent, _group(parent, total=3))
        await _finish_kids(parity, 1)
        family = await store.family(parent.id)
        kid = await store.family(child_id(parent.run_id, "fan", 2))
        assert family is not None
        assert (family.parent_id, dict(family.children)) == (
            None,
            {"completed": 1, "ready": 2},
        )
        assert kid is not None
        assert (kid.parent_id, dict(kid.children)) == (parent.id, {})
        assert await store.family("00000000-0000-7000-8000-000000000000") is None
