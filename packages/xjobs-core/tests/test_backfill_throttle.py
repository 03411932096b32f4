"""The backfill throttle's wait: it paces batches and ends early once the run says it is cancelled."""

from __future__ import annotations

import asyncio
import time

import pytest

from xjobs.factories.backfill_rate import Throttle


@pytest.mark.asyncio
async def test_the_second_batch_waits_out_the_interval() -> None:
    throttle = Throttle(0.2, lambda: False)
    started = time.monotonic()
    await throttle.wait()
    first = time.monotonic() - started
    await throttle.wait()
    assert first < 0.1
    assert time.monotonic() - started >= 0.19


@pytest.mark.asyncio
async def test_a_cancelled_run_ends_the_wait_at_its_next_poll() -> None:
    """A body that swallowed its task's cancellation still leaves the wait: it polls `cancelled`."""
    cancelled = False
    throttle = Throttle(60.0, lambda: cancelled)
    await throttle.wait()
    waiting = asyncio.create_task(throttle.wait())
    await asyncio.sleep(0.1)
    assert not waiting.done()
    cancelled = True
    await asyncio.wait_for(waiting, 1.0)


@pytest.mark.asyncio
async def test_cancelling_the_task_ends_the_wait() -> None:
    throttle = Throttle(60.0, lambda: False)
    await throttle.wait()
    waiting = asyncio.create_task(throttle.wait())
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 1.0)
