"""The worker-process tests' app: at worker start it enqueues one slow job that leaves markers.

The job writes `$XJOBS_E2E_STARTED` when it begins, sleeps `$XJOBS_E2E_SLEEP` seconds, then writes
`$XJOBS_E2E_FINISHED`; the test reads the markers to see whether the drain let it finish.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from pydantic import BaseModel

import xjobs


class Nap(BaseModel):
    seconds: float


def _mark(variable: str, text: str) -> None:
    Path(os.environ[variable]).write_text(text)


@xjobs.job(tenant="none", idempotency_key=lambda i: "the-one-nap")
async def slow_nap(ctx: xjobs.JobContext, input: Nap) -> None:
    await asyncio.to_thread(_mark, "XJOBS_E2E_STARTED", ctx.job_id)
    await asyncio.sleep(input.seconds)
    await asyncio.to_thread(_mark, "XJOBS_E2E_FINISHED", ctx.job_id)


async def enqueue_one_nap(app: xjobs.App) -> None:
    await app.enqueue(slow_nap, Nap(seconds=float(os.environ.get("XJOBS_E2E_SLEEP", "1.5"))))


app = xjobs.App(backend="memory://", jobs=[sys.modules[__name__]], on_worker_start=enqueue_one_nap)
