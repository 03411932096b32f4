"""Parity: `when_busy="fail"` refuses only on evidence of ANOTHER holder; a run that meets its own
job's leftover slot (an earlier claim's, not yet expired) sheds (semantics.md, "The worker")."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from xjobs import Concurrency, JobContext, job
from xjobs.contract.stores import SlotHolder
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE, Item, SettledLog, key_of, org_of, within

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("slots")]

DEAD_LEASE_MS = 1_000  # the lease of the worker that died holding the slot
LEFTOVER_TTL_MS = 600_000  # its slot outlives that lease


class TestOwnLeftoverSlot:
    async def test_when_busy_fail_meeting_its_own_leftover_slot_sheds_and_runs_once_it_expires(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the reclaimed run finds only its own job's earlier claim in the slot: no other
        holder is in evidence, so it sheds (ready, uncounted, no refusal), and it runs once the
        leftover slot expired."""
        ran: list[str] = []
        log = SettledLog()

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="fail"),
            on_settled=log,
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item(org="org-1"))
            # A worker claims it, takes its slot, and dies: neither is given back.
            dead = await parity.claim_one(QUEUE, worker_id="dead-worker", lease_ms=DEAD_LEASE_MS)
            key = f"job-key:{quote(body.name, safe='')}:org-1"
            leftover = SlotHolder(dead.id, dead.claims)
            assert await parity.slots.acquire(key, leftover, 1, LEFTOVER_TTL_MS)
            parity.clock.advance(DEAD_LEASE_MS + 1)  # its lease lapsed; the slot did not
            shed_stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the reclaim to be admitted"
            )
            shed, ran_while_shed = await app.get_job(result.job_id), list(ran)
            holders = await parity.slots.holders(key)
            parity.clock.advance(LEFTOVER_TTL_MS)  # the leftover slot expires
            run_stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the run after the expiry"
            )
            done = await app.get_job(result.job_id)
        assert (shed_stats.shed, shed_stats.refused, ran_while_shed) == (1, 0, [])
        assert shed.state == "ready"
        assert shed.claims == dead.claims + 1
        assert holders == [leftover]
        assert (run_stats.completed, done.state, ran) == (1, "completed", ["k-1"])
        assert [e.outcome for e in log.for_job(result.job_id)] == ["completed"]

    async def test_when_busy_fail_still_refuses_beside_its_own_leftover_and_another_holder(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the evidence is any holder of another job; the run's own leftover does not hide it."""
        ran: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=2, when_busy="fail"),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item(org="org-1"))
            dead = await parity.claim_one(QUEUE, worker_id="dead-worker", lease_ms=DEAD_LEASE_MS)
            key = f"job-key:{quote(body.name, safe='')}:org-1"
            assert await parity.slots.acquire(
                key, SlotHolder(dead.id, dead.claims), 2, LEFTOVER_TTL_MS
            )
            assert await parity.slots.acquire(key, SlotHolder("another-job", 1), 2, LEFTOVER_TTL_MS)
            parity.clock.advance(DEAD_LEASE_MS + 1)
            stats = await within(
                app.run_worker(concurrency=1, until_idle=True), what="the reclaim to be refused"
            )
            refused = await app.get_job(result.job_id)
        assert (stats.refused, stats.shed, ran) == (1, 0, [])
        assert refused.state == "failed"
        assert refused.last_error is not None
        assert "another-job" in refused.last_error
