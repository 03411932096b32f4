"""A result waiter of one process reads a completion another process wrote, within the short poll."""

from __future__ import annotations

import asyncio

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.driver import ClaimOptions
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend


@pytest.mark.asyncio
async def test_a_completion_on_another_connection_reaches_a_waiter(db_url: str) -> None:
    waiting = await open_backend(db_url, clock=ManualClock())
    working = await open_backend(db_url, clock=ManualClock())
    try:
        assert waiting.results is not None
        assert working.results is not None
        job = new_job(queue="q")
        await working.jobs.enqueue([job])
        (claimed,) = (await working.jobs.claim(ClaimOptions("w", {"q": 1}, lease_ms=60_000))).jobs

        async def wait_for_result() -> str | None:
            assert waiting.results is not None
            while True:
                stored = await waiting.results.read(job.id)
                if stored is not None and stored.state == "completed":
                    return stored.result
                await waiting.results.wait(job.id, 60_000)

        waiter = asyncio.ensure_future(wait_for_result())
        await asyncio.sleep(0.1)
        assert await working.results.complete(claimed.claim, '{"ok": true}')
        assert await asyncio.wait_for(waiter, 1) == '{"ok": true}'
    finally:
        await working.close()
        await waiting.close()
