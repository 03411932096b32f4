"""Parity: a worker's registry row lives as long as the lease the worker declared (at least a
minute), not a fixed visibility timeout (semantics.md, "The worker")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from xjobs.app import App
from xjobs.contract.driver import ClaimOptions, ClaimResult, JobDriver
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("workers")]

MINUTE_MS = 60_000


class NoPresenceRides:
    """The real driver, whose claims do not refresh the worker's row: the row lives on its announce."""

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        return await self.inner.claim(replace(options, presence_ttl_ms=None))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_worker_row_expires_after_the_lease_its_worker_declared(
    parity: ParityEnv,
) -> None:
    """Rule: a worker with a 5-minute lease is listed 4 minutes after its last sign of life; one
    with the default 30 s lease (a minute's row at least) is gone by then; 6 minutes on, both are."""
    backend = replace(parity.backend, jobs=NoPresenceRides(parity.backend.jobs))
    async with App(backend, clock=parity.clock, retention=None) as app:
        long = app.worker(queues=[QUEUE], lease=timedelta(minutes=5))
        short = app.worker(queues=[QUEUE])
        await long.start()
        await short.start()
        try:
            listed = {w.id for w in await parity.workers.list()}
            assert listed == {long.id, short.id}
            parity.clock.advance(4 * MINUTE_MS)
            assert [w.id for w in await parity.workers.list()] == [long.id]
            parity.clock.advance(2 * MINUTE_MS)
            assert await parity.workers.list() == []
        finally:
            await long.stop()
            await short.stop()
