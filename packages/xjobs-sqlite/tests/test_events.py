"""Events across processes: a send on one connection wakes the run another parked, in its tenant only."""

from __future__ import annotations

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.driver import ClaimOptions
from xjobs.run.settle import parking
from xjobs.testing.rows import event_wait, new_job
from xjobs_sqlite.backend import open_backend


@pytest.mark.asyncio
async def test_a_send_on_another_connection_makes_the_parked_run_due(db_url: str) -> None:
    clock = ManualClock()
    parking_side = await open_backend(db_url, clock=clock)
    sending_side = await open_backend(db_url, clock=clock)
    try:
        assert parking_side.events is not None
        assert sending_side.events is not None
        await parking_side.jobs.enqueue([new_job(queue="q")])
        options = ClaimOptions("w", {"q": 1}, lease_ms=60_000)
        (claimed,) = (await parking_side.jobs.claim(options)).jobs
        park = parking(clock.now_ms() + 3_600_000)
        assert await parking_side.events.park(
            claimed.claim, event_wait(claimed, tenant="org-1"), park
        )
        await sending_side.events.send("order.paid", "{}", tenant="org-2")
        assert (await parking_side.jobs.claim(options)).jobs == ()
        await sending_side.events.send("order.paid", "{}", tenant="org-1")
        (again,) = (await parking_side.jobs.claim(options)).jobs
        assert again.id == claimed.id
    finally:
        await sending_side.close()
        await parking_side.close()
