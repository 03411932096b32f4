"""The memory outbox deletes a published row: nothing of it is left to claim, count or purge."""

from __future__ import annotations

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.backend import WakeSource
from xjobs.memory.outbox import MemoryOutboxStore
from xjobs.testing.rows import new_job

LEASE_MS = 30_000


@pytest.mark.asyncio
async def test_a_published_row_is_deleted_not_flagged() -> None:
    clock = ManualClock()
    outbox = MemoryOutboxStore(clock, WakeSource())
    published, staged = new_job(idempotency_key="p"), new_job(idempotency_key="s")
    await outbox.stage([published, staged])
    assert [r.id for r in await outbox.claim("relay-a", 1, LEASE_MS)] == [published.id]
    assert await outbox.mark_published("relay-a", [published.id]) == 1
    assert await outbox.pending() == 1
    clock.advance(2 * LEASE_MS)  # every lease lapsed: a flagged row would be claimable again
    assert [r.id for r in await outbox.claim("relay-b", 10, LEASE_MS)] == [staged.id]
    # Gone, not kept: staging the same id again stages a new row (a kept one would absorb it).
    await outbox.stage([published])
    assert await outbox.pending() == 2
