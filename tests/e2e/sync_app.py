"""The plain-`def`-body tests' app, on the backend `$XJOBS_E2E_URL` names.

Every body appends `<name> <attempt>` to `$XJOBS_E2E_RUNS` when it starts, so the test can count
its runs. `crunch` holds the CPU in pure Python (no sleep, no I/O) for `seconds`; `stubborn`
computes for an hour on its first run, ignoring `ctx.cancelled`, and returns at once on any later
one; `explode` and its `async def` twin `explode_async` raise on every attempt.
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
from xjobs import SyncJobContext

RETRY = xjobs.Retry(attempts=3, base=timedelta(milliseconds=50), cap=timedelta(milliseconds=50))


class Work(BaseModel):
    key: str
    seconds: float = 0.0


def _runs() -> Path:
    return Path(os.environ["XJOBS_E2E_RUNS"])


def _append(line: str) -> None:
    with _runs().open("a") as runs:
        runs.write(f"{line}\n")


def _spin(seconds: float) -> int:
    """Pure-Python arithmetic until `seconds` have passed: the thread holds the GIL but for the
    interpreter's switch interval."""
    total = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i in range(2_000):
            total = (total + i * i) % 1_000_003
    return total


@xjobs.job(tenant="none", idempotency_key=lambda work: work.key)
def crunch(ctx: SyncJobContext, work: Work) -> None:
    _append(f"crunch {ctx.attempt}")
    _spin(work.seconds)
    _append(f"crunched {ctx.attempt} cancelled={ctx.cancelled}")


@xjobs.job(tenant="none", idempotency_key=lambda work: work.key)
def stubborn(ctx: SyncJobContext, work: Work) -> None:
    first = not _runs().exists()
    _append(f"stubborn {ctx.attempt}")
    if first:
        _spin(3600.0)  # the test drains the worker meanwhile; this thread never returns
        _append("stubborn returned")


@xjobs.job(tenant="none", idempotency_key=lambda work: work.key, retry=RETRY)
def explode(ctx: SyncJobContext, work: Work) -> None:
    _append(f"explode {ctx.attempt}")
    raise ValueError(f"boom on attempt {ctx.attempt}")


@xjobs.job(tenant="none", idempotency_key=lambda work: work.key, retry=RETRY)
async def explode_async(ctx: xjobs.JobContext, work: Work) -> None:
    await asyncio.to_thread(_append, f"explode_async {ctx.attempt}")
    raise ValueError(f"boom on attempt {ctx.attempt}")


app = xjobs.App(backend=os.environ.get("XJOBS_E2E_URL", "memory://"), jobs=[sys.modules[__name__]])
