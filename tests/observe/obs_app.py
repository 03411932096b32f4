"""The telemetry tests' app: one job per way a run can end, on the backend `$XJOBS_OBS_URL` names.

Bodies that wait do so on marker files under `$XJOBS_OBS_DIR`, which the test creates.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

import xjobs
from xjobs import Concurrency, JobContext, Retry, job

QUEUE = "obs"
FAST = Retry(attempts=3, base=timedelta(milliseconds=10), cap=timedelta(milliseconds=50))


class Item(BaseModel):
    key: str


def _marker(name: str) -> Path:
    return Path(os.environ.get("XJOBS_OBS_DIR", ".")) / name


async def _until(name: str) -> None:
    while not await asyncio.to_thread(_marker(name).exists):  # noqa: ASYNC110 - a file another process makes
        await asyncio.sleep(0.05)


@job(tenant="none", idempotency_key=lambda i: i.key, queue=QUEUE)
async def fine(ctx: JobContext, input: Item) -> None:
    """Completes at once."""


@job(tenant="none", idempotency_key=lambda i: i.key, queue=QUEUE, retry=FAST)
async def flaky(ctx: JobContext, input: Item) -> None:
    """Fails its first attempt, completes the second."""
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")


@job(
    tenant="none",
    idempotency_key=lambda i: i.key,
    queue=QUEUE,
    retry=Retry(attempts=2, base=timedelta(milliseconds=10), cap=timedelta(milliseconds=50)),
)
async def doomed(ctx: JobContext, input: Item) -> None:
    """Fails every attempt: retried once, then dead."""
    raise RuntimeError("this job always fails")


@job(
    tenant="none",
    idempotency_key=lambda i: i.key,
    queue=QUEUE,
    retry=Retry(attempts=1, dead_letter=False),
)
async def dropped(ctx: JobContext, input: Item) -> None:
    """Fails its only attempt without a dead letter: dropped."""
    raise RuntimeError("dropped on the floor")


@job(
    tenant="none",
    idempotency_key=lambda i: i.key,
    queue=QUEUE,
    concurrency=Concurrency(key=lambda i: "the-one", limit=1, when_busy="fail"),
)
async def exclusive(ctx: JobContext, input: Item) -> None:
    """Holds its key until `release-KEY` exists; a second one meanwhile is refused."""
    await _until(f"release-{input.key}")


@job(tenant="none", idempotency_key=lambda i: i.key, queue=QUEUE)
async def lingering(ctx: JobContext, input: Item) -> None:
    """Runs until it is cancelled (or `release-KEY` exists)."""
    await _until(f"release-{input.key}")


@job(tenant="none", idempotency_key=lambda i: i.key, queue=QUEUE)
async def blocker(ctx: JobContext, input: Item) -> None:
    """Once `block-KEY` exists, blocks the event loop (a body that calls blocking code)."""
    await _until(f"block-{input.key}")
    time.sleep(120)  # noqa: ASYNC251 - the point: a body that blocks its loop


# retention=None: the scenarios pin the worker's queues and events to this app's own jobs
app = xjobs.App(
    backend=os.environ.get("XJOBS_OBS_URL", "memory://"),
    jobs=[sys.modules[__name__]],
    retention=None,
)
