"""Parity: the outbox store at the store level: stage, the relay's leased claim, the fenced mark
(stores.py, "OutboxStore"; semantics.md, "The transactional outbox")."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import pytest

from xjobs.contract.stores import OutboxStore

if TYPE_CHECKING:
    from xjobs.contract.driver import NewJob
    from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("outbox")]

RELAY, OTHER = "relay-a", "relay-b"
LEASE_MS = 30_000
STAGE_GAP_MS = 1_000  # between stages, so "oldest staged first" has an order to keep


def _outbox(parity: ParityEnv) -> OutboxStore:
    outbox = parity.backend.outbox
    assert outbox is not None, 'mark the scenario @pytest.mark.requires("outbox")'
    return outbox


def _columns(row: NewJob) -> dict[str, Any]:
    """Every column of a row, the payload decoded (a store may respell the JSON)."""
    return {**asdict(row), "payload": json.loads(row.payload)}


def _ids(rows: list[NewJob]) -> list[str]:
    return [row.id for row in rows]


async def _staged(parity: ParityEnv, count: int, **overrides: Any) -> list[NewJob]:
    """Stage `count` rows one at a time, the clock moving between them; answers them oldest first."""
    staged = []
    for _ in range(count):
        row = parity.new_job(**overrides)
        (result,) = await _outbox(parity).stage([row])
        assert (result.job_id, result.deduped) == (row.id, False)
        staged.append(row)
        parity.clock.advance(STAGE_GAP_MS)
    return staged


async def _staged_one(parity: ParityEnv, **overrides: Any) -> NewJob:
    (row,) = await _staged(parity, 1, **overrides)
    return row


async def _claim_one(parity: ParityEnv, relay: str = RELAY, lease_ms: int = LEASE_MS) -> NewJob:
    rows = await _outbox(parity).claim(relay, 1, lease_ms)
    assert len(rows) == 1, f"expected one claimable staged row for {relay}, got {len(rows)}"
    return rows[0]


class TestStage:
    async def test_stage_answers_each_rows_own_ids(self, parity: ParityEnv) -> None:
        """Rule: a staged row's id IS its job's id and its run id is allocated at stage: `stage`
        answers one EnqueueResult per row, in order, with the row's own ids, never deduped."""
        rows = [parity.new_job() for _ in range(3)]
        results = await _outbox(parity).stage(rows)
        assert [(r.job_id, r.run_id, r.deduped) for r in results] == [
            (row.id, row.run_id, False) for row in rows
        ]

    async def test_a_staged_row_is_pending_and_is_no_job_yet(self, parity: ParityEnv) -> None:
        """Rule: `stage` commits before it answers: the rows are pending at once, and no job
        exists until a relay publishes them."""
        rows = [parity.new_job() for _ in range(3)]
        await _outbox(parity).stage(rows)
        assert await _outbox(parity).pending() == 3
        assert [await parity.backend.jobs.get(row.id) for row in rows] == [None, None, None]

    async def test_nothing_is_pending_at_first(self, parity: ParityEnv) -> None:
        """Rule: a fresh outbox has nothing pending and nothing to claim."""
        assert await _outbox(parity).pending() == 0
        assert await _outbox(parity).claim(RELAY, 10, LEASE_MS) == []

    async def test_a_claimed_row_carries_every_column_as_staged(self, parity: ParityEnv) -> None:
        """Rule: a staged row is a complete NewJob: the claim answers every column exactly as
        staged (the payload as the same JSON value)."""
        row = parity.new_job(
            tenant_id="org-7",
            idempotency_key="order-42",
            payload='{"order": 42, "lines": [{"sku": "a", "qty": 2}], "note": "caf\\u00e9"}',
            priority=7,
            run_at_ms=parity.clock.now_ms() + 60_000,
            max_attempts=9,
            dead_letter=False,
            enqueued_by="user-3",
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        bare = parity.new_job()  # the nullable columns left null
        await _outbox(parity).stage([row, bare])
        claimed = {c.id: c for c in await _outbox(parity).claim(RELAY, 10, LEASE_MS)}
        assert sorted(claimed) == sorted([row.id, bare.id])
        assert _columns(claimed[row.id]) == _columns(row)
        assert _columns(claimed[bare.id]) == _columns(bare)


class TestClaim:
    async def test_staged_rows_are_claimed_oldest_first(self, parity: ParityEnv) -> None:
        """Rule: the claim takes unpublished rows oldest staged first (by when they were staged,
        not by id: here the later rows have the smaller ids)."""
        ids = sorted((parity.new_job().id for _ in range(4)), reverse=True)
        rows = [await _staged_one(parity, id=row_id) for row_id in ids]
        first = await _outbox(parity).claim(RELAY, 2, LEASE_MS)
        rest = await _outbox(parity).claim(RELAY, 10, LEASE_MS)
        assert (_ids(first), _ids(rest)) == (_ids(rows[:2]), _ids(rows[2:]))

    async def test_the_claim_honours_its_limit(self, parity: ParityEnv) -> None:
        """Rule: a claim leases at most `limit` rows; the others stay claimable."""
        await _staged(parity, 5)
        taken = await _outbox(parity).claim(RELAY, 3, LEASE_MS)
        remaining = await _outbox(parity).claim(OTHER, 10, LEASE_MS)
        assert (len(taken), len(remaining)) == (3, 2)
        assert set(_ids(taken)).isdisjoint(_ids(remaining))

    async def test_a_live_lease_is_not_claimable(self, parity: ParityEnv) -> None:
        """Rule: a claimed row is not claimable while its lease is live, by another relay nor by
        its own; it is still pending."""
        await _staged(parity, 1)
        await _claim_one(parity)
        at_once = await _outbox(parity).claim(OTHER, 10, LEASE_MS)
        parity.clock.advance(LEASE_MS - 1)
        just_before = await _outbox(parity).claim(OTHER, 10, LEASE_MS)
        own = await _outbox(parity).claim(RELAY, 10, LEASE_MS)
        assert (at_once, just_before, own) == ([], [], [])
        assert await _outbox(parity).pending() == 1

    async def test_a_lapsed_lease_is_retaken_by_another_relay(self, parity: ParityEnv) -> None:
        """Rule: once the lease lapses (`lease_ms` from the claim), another relay's claim takes the
        row, with every column as staged."""
        (row,) = await _staged(parity, 1)
        await _claim_one(parity)
        parity.clock.advance(LEASE_MS + 1)
        retaken = await _claim_one(parity, OTHER)
        assert _columns(retaken) == _columns(row)
        assert await _outbox(parity).pending() == 1

    async def test_a_lease_lasts_lease_ms_from_its_claim(self, parity: ParityEnv) -> None:
        """Rule: the lease runs `lease_ms` from the claim that took it, not from the stage: a row
        staged long before is leased for the whole `lease_ms`."""
        await _staged(parity, 1)
        parity.clock.advance(10 * LEASE_MS)
        await _claim_one(parity)
        parity.clock.advance(LEASE_MS - 1)
        assert await _outbox(parity).claim(OTHER, 10, LEASE_MS) == []

    async def test_a_retake_leases_the_row_anew(self, parity: ParityEnv) -> None:
        """Rule: the retaking relay holds a fresh lease: the first relay cannot take it back
        while that lease is live."""
        await _staged(parity, 1)
        await _claim_one(parity)
        parity.clock.advance(LEASE_MS + 1)
        await _claim_one(parity, OTHER)
        parity.clock.advance(LEASE_MS - 1)
        assert await _outbox(parity).claim(RELAY, 10, LEASE_MS) == []

    async def test_concurrent_claims_get_disjoint_rows(self, parity: ParityEnv) -> None:
        """Rule: the claim is one atomic step: concurrent claims never lease the same row, and what
        they leave is still claimable."""
        rows = await _staged(parity, 6)
        relays = [f"relay-{n}" for n in range(3)]
        answers = await asyncio.gather(
            *(_outbox(parity).claim(relay, 3, LEASE_MS) for relay in relays)
        )
        taken = [row_id for answer in answers for row_id in _ids(answer)]
        assert len(taken) == len(set(taken)), f"a row was leased twice: {taken}"
        rest = await _outbox(parity).claim("relay-late", 10, LEASE_MS)
        assert sorted(taken + _ids(rest)) == sorted(_ids(rows))


class TestMarkPublished:
    async def test_marking_held_rows_answers_how_many(self, parity: ParityEnv) -> None:
        """Rule: `mark_published` answers how many of the ids this relay held; `pending` drops."""
        await _staged(parity, 3)
        claimed = await _outbox(parity).claim(RELAY, 2, LEASE_MS)
        marked = await _outbox(parity).mark_published(RELAY, _ids(claimed))
        assert (marked, await _outbox(parity).pending()) == (2, 1)

    async def test_a_marked_row_is_never_claimed_again(self, parity: ParityEnv) -> None:
        """Rule: a published row is done with: it is not claimed again, not even after its lease
        would have lapsed, and a second mark answers 0."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        assert await _outbox(parity).mark_published(RELAY, [row.id]) == 1
        parity.clock.advance(LEASE_MS + 1)
        again = await _outbox(parity).claim(OTHER, 10, LEASE_MS)
        remark = await _outbox(parity).mark_published(RELAY, [row.id])
        assert (again, remark, await _outbox(parity).pending()) == ([], 0, 0)

    async def test_marking_an_unknown_id_answers_zero(self, parity: ParityEnv) -> None:
        """Rule: an id the outbox never staged is held by nobody: marking it answers 0 and
        changes nothing; an empty mark answers 0."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        unknown = parity.new_job().id
        assert await _outbox(parity).mark_published(RELAY, [unknown]) == 0
        assert await _outbox(parity).mark_published(RELAY, []) == 0
        mixed = await _outbox(parity).mark_published(RELAY, [unknown, row.id])
        assert (mixed, await _outbox(parity).pending()) == (1, 0)

    async def test_an_unclaimed_row_is_not_marked(self, parity: ParityEnv) -> None:
        """Rule: a mark is fenced on the claim: a row no relay claimed is held by nobody, so it is
        not marked and stays claimable."""
        (row,) = await _staged(parity, 1)
        assert await _outbox(parity).mark_published(RELAY, [row.id]) == 0
        assert _ids(await _outbox(parity).claim(RELAY, 10, LEASE_MS)) == [row.id]

    async def test_another_relays_mark_is_refused_while_the_lease_is_live(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only the holder marks: another relay's mark of a leased row answers 0 and the row
        stays pending; the holder's then answers 1."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        foreign = await _outbox(parity).mark_published(OTHER, [row.id])
        still = await _outbox(parity).pending()
        own = await _outbox(parity).mark_published(RELAY, [row.id])
        assert (foreign, still, own, await _outbox(parity).pending()) == (0, 1, 1, 0)

    async def test_the_mark_is_fenced_after_a_retake(self, parity: ParityEnv) -> None:
        """Rule: a row whose lease moved to another relay is left alone: after a retake the first
        relay's mark answers 0 and the row stays pending; the retaking relay's answers 1."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        parity.clock.advance(LEASE_MS + 1)
        await _claim_one(parity, OTHER)
        stale = await _outbox(parity).mark_published(RELAY, [row.id])
        still = await _outbox(parity).pending()
        fresh = await _outbox(parity).mark_published(OTHER, [row.id])
        assert (stale, still, fresh, await _outbox(parity).pending()) == (0, 1, 1, 0)

    async def test_a_stale_mark_spares_the_rows_it_still_holds(self, parity: ParityEnv) -> None:
        """Rule: the fence is per row: of a relay's ids, the ones retaken by another relay are left
        alone and the ones it still holds are marked."""
        retaken = await _staged(parity, 1)
        held = await _staged(parity, 1)
        assert _ids(await _outbox(parity).claim(RELAY, 1, LEASE_MS)) == _ids(retaken)
        parity.clock.advance(LEASE_MS + 1)
        assert _ids(await _outbox(parity).claim(OTHER, 1, LEASE_MS)) == _ids(retaken)
        assert _ids(await _outbox(parity).claim(RELAY, 1, LEASE_MS)) == _ids(held)
        marked = await _outbox(parity).mark_published(RELAY, _ids(retaken + held))
        assert (marked, await _outbox(parity).pending()) == (1, 1)


class TestRepublish:
    async def test_a_republished_live_job_is_deduped(self, parity: ParityEnv) -> None:
        """Rule: a relay that dies between publish and mark publishes the row again once its lease
        is retaken; `enqueue` of the repeated id answers the same ids, deduped, while it is live."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        (first,) = await parity.backend.jobs.enqueue([row])
        parity.clock.advance(LEASE_MS + 1)  # the first relay crashed before its mark
        again = await _claim_one(parity, OTHER)
        (second,) = await parity.backend.jobs.enqueue([again])
        assert (first.job_id, first.run_id, first.deduped) == (row.id, row.run_id, False)
        assert (second.job_id, second.run_id, second.deduped) == (row.id, row.run_id, True)
        assert await _outbox(parity).mark_published(OTHER, [row.id]) == 1
        assert (await parity.record(row.id)).state == "ready"

    async def test_a_republished_finished_job_is_deduped(self, parity: ParityEnv) -> None:
        """Rule: a repeated publish of the same id is deduped once its job finished too: the job
        never runs twice."""
        await _staged(parity, 1)
        row = await _claim_one(parity)
        (first,) = await parity.backend.jobs.enqueue([row])
        claimed = await parity.claim_one(row.queue)
        assert claimed.id == row.id
        assert await parity.backend.jobs.ack(claimed.claim)
        parity.clock.advance(LEASE_MS + 1)
        again = await _claim_one(parity, OTHER)
        (second,) = await parity.backend.jobs.enqueue([again])
        assert (first.deduped, second.job_id, second.run_id, second.deduped) == (
            False,
            row.id,
            row.run_id,
            True,
        )
        record = await parity.record(row.id)
        assert (record.state, record.attempt) == ("completed", 1)
        assert (await parity.claim({row.queue: 10})).jobs == ()
