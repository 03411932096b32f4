"""A wake resets the worker's idle backoff: the passes after it start again at the floor."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job
from xjobs.contract.driver import ClaimOptions, ClaimResult, JobDriver


class Nothing(BaseModel):
    """An input."""


class PassClock:
    """A job driver that notes when each claim pass ran (monotonic seconds)."""

    def __init__(self, inner: JobDriver) -> None:
        self._inner = inner
        self.passes: list[float] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        self.passes.append(time.monotonic())
        return await self._inner.claim(options)


@pytest.mark.asyncio
async def test_a_wake_resets_the_idle_backoff_to_the_floor() -> None:
    @job(tenant="none", idempotency_key=lambda _: "k", queue="woken")
    async def body(ctx: JobContext, input: Nothing) -> None:
        return None

    backend = await xjobs.connect("memory://")
    counted = PassClock(backend.jobs)
    app = xjobs.App(replace(backend, jobs=counted), jobs=[body])  # type: ignore[arg-type]
    async with app:
        worker = app.worker(poll_floor=timedelta(milliseconds=10))
        await worker.start()
        try:
            await asyncio.sleep(1.5)  # empty passes: 10, 20, 40, … 640 ms apart, then 1,280
            assert backend.wake is not None
            woken_at = time.monotonic()
            backend.wake.emit("woken")
            await asyncio.sleep(0.3)
        finally:
            await worker.stop()
    after = [t for t in counted.passes if t >= woken_at]
    # A reset backoff passes at once, then 10, 20, 40, 80 ms later; without it the next empty
    # pass would wait out the grown 1,280 ms.
    assert len(after) >= 3, f"{len(after)} passes in the 300 ms after the wake"
    await backend.close()
