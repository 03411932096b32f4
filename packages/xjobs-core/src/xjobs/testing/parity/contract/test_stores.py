"""Parity: the worker registry and the fleet lease store (semantics.md, "The worker", "Lessons")."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from xjobs.contract.driver import ClaimOptions
from xjobs.contract.stores import SlotHolder, WorkerInfo
from xjobs.ids import new_id

if TYPE_CHECKING:
    from xjobs.testing.parity.env import ParityEnv

pytestmark = pytest.mark.xjobs_parity

TTL_MS = 1_000
KEY = "job:parity_job"
J1, J2, J3 = new_id(), new_id(), new_id()


def _worker(parity: ParityEnv, worker_id: str = "worker-a", **overrides: Any) -> WorkerInfo:
    now = parity.clock.now_ms()
    info = WorkerInfo(
        id=worker_id,
        host="host-1",
        pid=4242,
        queues=("alpha", "beta"),
        started_at_ms=now,
        last_seen_ms=now,
    )
    return replace(info, **overrides)


def _holder(job_id: str, claims: int = 1) -> SlotHolder:
    return SlotHolder(job_id=job_id, claims=claims)


@pytest.mark.requires("workers")
class TestWorkerRegistry:
    async def test_lists_an_announced_worker(self, parity: ParityEnv) -> None:
        """Rule: a worker's row (id, host, pid, queues, started, last seen) is listed once announced."""
        info = _worker(parity)
        await parity.workers.announce(info, TTL_MS)
        assert await parity.workers.list() == [info]

    async def test_lists_workers_sorted_by_id(self, parity: ParityEnv) -> None:
        """Rule: the registry lists the unexpired rows sorted by id."""
        for worker_id in ("worker-c", "worker-a", "worker-b"):
            await parity.workers.announce(_worker(parity, worker_id), TTL_MS)
        assert [w.id for w in await parity.workers.list()] == ["worker-a", "worker-b", "worker-c"]

    async def test_an_announce_overwrites_the_row(self, parity: ParityEnv) -> None:
        """Rule: announce writes (or overwrites) the worker's one row."""
        await parity.workers.announce(_worker(parity, queues=("alpha",)), TTL_MS)
        await parity.workers.announce(_worker(parity, queues=("gamma",)), TTL_MS)
        assert [w.queues for w in await parity.workers.list()] == [("gamma",)]

    async def test_a_row_is_listed_until_its_ttl_lapses(self, parity: ParityEnv) -> None:
        """Rule: a row is live for `ttl_ms` after its last beat."""
        await parity.workers.announce(_worker(parity), TTL_MS)
        parity.clock.advance(TTL_MS - 1)
        assert [w.id for w in await parity.workers.list()] == ["worker-a"]

    async def test_a_row_expires_after_its_ttl(self, parity: ParityEnv) -> None:
        """Rule: registry rows expire after the visibility timeout and leave the list."""
        await parity.workers.announce(_worker(parity), TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        assert await parity.workers.list() == []

    async def test_a_beat_extends_the_row(self, parity: ParityEnv) -> None:
        """Rule: a beat refreshes `last_seen` and the row's expiry."""
        await parity.workers.announce(_worker(parity), TTL_MS)
        beat_at = parity.clock.advance(TTL_MS - 200)
        assert await parity.workers.beat("worker-a", TTL_MS) is True
        parity.clock.advance(TTL_MS - 200)
        assert [(w.id, w.last_seen_ms) for w in await parity.workers.list()] == [
            ("worker-a", beat_at)
        ]

    async def test_a_beat_of_an_expired_row_answers_false(self, parity: ParityEnv) -> None:
        """Rule: a beat answers whether the row was still there."""
        await parity.workers.announce(_worker(parity), TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        assert await parity.workers.beat("worker-a", TTL_MS) is False

    async def test_a_beat_of_an_unknown_worker_answers_false(self, parity: ParityEnv) -> None:
        """Rule: a beat answers whether the row was there; it never creates one."""
        landed = await parity.workers.beat("worker-a", TTL_MS)
        assert (landed, await parity.workers.list()) == (False, [])

    async def test_forget_removes_the_row(self, parity: ParityEnv) -> None:
        """Rule: `stop()` removes its worker's row (forget)."""
        await parity.workers.announce(_worker(parity, "worker-a"), TTL_MS)
        await parity.workers.announce(_worker(parity, "worker-b"), TTL_MS)
        await parity.workers.forget("worker-a")
        assert [w.id for w in await parity.workers.list()] == ["worker-b"]

    async def test_forget_of_an_unknown_worker_is_quiet(self, parity: ParityEnv) -> None:
        """Rule: forget is idempotent (a stop after the row expired must not raise)."""
        await parity.workers.forget("worker-a")
        assert await parity.workers.list() == []

    async def test_a_claim_with_a_presence_ttl_refreshes_the_row(self, parity: ParityEnv) -> None:
        """Rule: a claim with `presence_ttl_ms` refreshes the worker's row in the same round trip."""
        await parity.workers.announce(_worker(parity), TTL_MS)
        claimed_at = parity.clock.advance(TTL_MS - 200)
        options = ClaimOptions(
            worker_id="worker-a", queues={"parity": 1}, lease_ms=30_000, presence_ttl_ms=TTL_MS
        )
        await parity.backend.jobs.claim(options)
        parity.clock.advance(TTL_MS - 200)
        assert [(w.id, w.last_seen_ms) for w in await parity.workers.list()] == [
            ("worker-a", claimed_at)
        ]


@pytest.mark.requires("slots")
class TestLeaseStore:
    async def test_acquires_up_to_the_limit(self, parity: ParityEnv) -> None:
        """Rule: a slot of `key` is taken while fewer than `limit` unexpired holders have one."""
        taken = [await parity.slots.acquire(KEY, _holder(j), 2, TTL_MS) for j in (J1, J2)]
        assert taken == [True, True]

    async def test_refuses_over_the_limit(self, parity: ParityEnv) -> None:
        """Rule: with `limit` unexpired holders, another holder is refused."""
        for job in (J1, J2):
            await parity.slots.acquire(KEY, _holder(job), 2, TTL_MS)
        assert await parity.slots.acquire(KEY, _holder(J3), 2, TTL_MS) is False

    async def test_a_holder_acquiring_again_counts_once(self, parity: ParityEnv) -> None:
        """Rule: a holder's own slot counts once."""
        await parity.slots.acquire(KEY, _holder(J1), 2, TTL_MS)
        again = await parity.slots.acquire(KEY, _holder(J1), 2, TTL_MS)
        other = await parity.slots.acquire(KEY, _holder(J2), 2, TTL_MS)
        holders = set(await parity.slots.holders(KEY))
        assert (again, other, holders) == (True, True, {_holder(J1), _holder(J2)})

    async def test_another_claim_of_the_same_job_is_another_holder(self, parity: ParityEnv) -> None:
        """Rule: a slot is owned by (job id, claim); a later claim of the job is a new holder."""
        await parity.slots.acquire(KEY, _holder(J1, claims=1), 1, TTL_MS)
        assert await parity.slots.acquire(KEY, _holder(J1, claims=2), 1, TTL_MS) is False

    async def test_keys_are_counted_apart(self, parity: ParityEnv) -> None:
        """Rule: each lease key has its own slots."""
        await parity.slots.acquire("job:first", _holder(J1), 1, TTL_MS)
        assert await parity.slots.acquire("job:second", _holder(J2), 1, TTL_MS) is True

    async def test_release_frees_the_slot(self, parity: ParityEnv) -> None:
        """Rule: a released slot can be taken by another holder."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        released = await parity.slots.release(KEY, _holder(J1))
        taken = await parity.slots.acquire(KEY, _holder(J2), 1, TTL_MS)
        assert (released, taken) == (True, True)

    async def test_release_is_idempotent(self, parity: ParityEnv) -> None:
        """Rule: a slot is released idempotently; a second release answers False."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        first = await parity.slots.release(KEY, _holder(J1))
        second = await parity.slots.release(KEY, _holder(J1))
        assert (first, second) == (True, False)

    async def test_release_by_a_non_holder_frees_nothing(self, parity: ParityEnv) -> None:
        """Rule: only the holder's own slot is released."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        released = await parity.slots.release(KEY, _holder(J2))
        assert (released, await parity.slots.holders(KEY)) == (False, [_holder(J1)])

    async def test_an_expired_slot_is_reclaimed(self, parity: ParityEnv) -> None:
        """Rule: a slot is reclaimed when its TTL lapses — never a counter a crash can leak."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        taken = await parity.slots.acquire(KEY, _holder(J2), 1, TTL_MS)
        assert (taken, await parity.slots.holders(KEY)) == (True, [_holder(J2)])

    async def test_an_unexpired_slot_is_kept(self, parity: ParityEnv) -> None:
        """Rule: a slot holds for its TTL."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        parity.clock.advance(TTL_MS - 1)
        assert await parity.slots.acquire(KEY, _holder(J2), 1, TTL_MS) is False

    async def test_holders_lists_only_unexpired_holders(self, parity: ParityEnv) -> None:
        """Rule: `holders` answers the unexpired holders of a key."""
        await parity.slots.acquire(KEY, _holder(J1), 3, TTL_MS)
        await parity.slots.acquire(KEY, _holder(J2), 3, TTL_MS * 5)
        parity.clock.advance(TTL_MS + 1)
        assert await parity.slots.holders(KEY) == [_holder(J2)]

    async def test_holders_of_an_unknown_key_is_empty(self, parity: ParityEnv) -> None:
        """Rule: `holders` is evidence of a run holding the key; no slot, no holder."""
        assert await parity.slots.holders(KEY) == []

    async def test_renew_extends_the_slot(self, parity: ParityEnv) -> None:
        """Rule: `renew` extends the holder's slot by `ttl_ms` from now."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        parity.clock.advance(TTL_MS - 200)
        renewed = await parity.slots.renew(KEY, _holder(J1), TTL_MS)
        parity.clock.advance(TTL_MS - 200)
        assert (renewed, await parity.slots.holders(KEY)) == (True, [_holder(J1)])

    async def test_renew_without_a_slot_answers_false(self, parity: ParityEnv) -> None:
        """Rule: `renew` answers whether the holder still held the slot; it never takes one."""
        renewed = await parity.slots.renew(KEY, _holder(J1), TTL_MS)
        assert (renewed, await parity.slots.holders(KEY)) == (False, [])

    async def test_renew_after_the_slot_expired_answers_false(self, parity: ParityEnv) -> None:
        """Rule: a slot whose TTL lapsed is no longer held; renewing it answers False."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        parity.clock.advance(TTL_MS + 1)
        assert await parity.slots.renew(KEY, _holder(J1), TTL_MS) is False

    async def test_a_limit_of_zero_refuses_every_acquire(self, parity: ParityEnv) -> None:
        """Rule: a concurrency limit of 0 is a hard stop, never "unlimited"."""
        taken = [await parity.slots.acquire(KEY, _holder(j), 0, TTL_MS) for j in (J1, J2)]
        assert (taken, await parity.slots.holders(KEY)) == ([False, False], [])

    async def test_a_limit_of_zero_refuses_even_a_holder_of_the_key(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a limit of 0 is a hard stop for every acquire, a slot's own holder included."""
        await parity.slots.acquire(KEY, _holder(J1), 1, TTL_MS)
        assert await parity.slots.acquire(KEY, _holder(J1), 0, TTL_MS) is False
