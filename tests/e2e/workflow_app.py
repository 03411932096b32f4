"""The kill -9 tests' app: a three-step workflow and a sleeping job, on the backend `$XJOBS_E2E_URL` names.

Each step appends its name to `$XJOBS_E2E_CALLS`, so the test can count how often each one ran.
The first attempt of `three_steps` writes `$XJOBS_E2E_AFTER_TWO` once step two is recorded and
then hangs, for the test to kill the worker there.
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


class Order(BaseModel):
    order_id: str


def _append(line: str) -> None:
    with Path(os.environ["XJOBS_E2E_CALLS"]).open("a") as calls:
        calls.write(f"{line}\n")


async def _call(name: str) -> str:
    await asyncio.to_thread(_append, name)
    return f"{name}-done"


@xjobs.job(tenant="none", idempotency_key=lambda order: order.order_id)
async def three_steps(ctx: xjobs.JobContext, order: Order) -> None:
    await ctx.step.run("one", _call, "one")
    await ctx.step.run("two", _call, "two")
    if ctx.attempt == 1:
        await asyncio.to_thread(Path(os.environ["XJOBS_E2E_AFTER_TWO"]).write_text, ctx.job_id)
        await asyncio.sleep(3600)  # the test kills the worker here
    await ctx.step.run("three", _call, "three")


@xjobs.job(tenant="none", idempotency_key=lambda order: order.order_id)
async def sleeper(ctx: xjobs.JobContext, order: Order) -> None:
    await ctx.step.run("before", _call, "before")
    await ctx.step.sleep("nap", timedelta(seconds=float(os.environ.get("XJOBS_E2E_NAP", "3"))))
    await asyncio.to_thread(_append, f"woke {time.time():.3f}")


app = xjobs.App(backend=os.environ.get("XJOBS_E2E_URL", "memory://"), jobs=[sys.modules[__name__]])
