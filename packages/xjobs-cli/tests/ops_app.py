"""The app the operator-command tests name as `opsapp:app` (copied into each test's directory).

Its backend URL comes from `XJOBS_CLI_TEST_URL`, so one module serves memory, Postgres and Redis.
"""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel

import xjobs


class Order(BaseModel):
    order_id: str
    card: str = "4111-1111-1111-1111"


# order ids whose charge fails (a test adds and clears them)
FAILING: set[str] = set()


@xjobs.job(
    tenant="none",
    idempotency_key=lambda o: o.order_id,
    queue="billing",
    retry=xjobs.Retry(attempts=1),
    redact_input=lambda o: {"order_id": o.order_id, "card": "****"},
)
async def charge(ctx: xjobs.JobContext, input: Order) -> None:
    await ctx.step.run("lookup", _lookup, input.order_id)
    if input.order_id in FAILING:
        raise RuntimeError(f"card declined for {input.order_id}")


async def _lookup(order_id: str) -> dict[str, str]:
    return {"found": order_id}


@xjobs.job(tenant="none", idempotency_key=lambda o: o.order_id)
async def receipt(ctx: xjobs.JobContext, input: Order) -> None:
    """Always completes."""


nightly = xjobs.task(
    job=receipt,
    cron="0 3 * * *",
    tz="Europe/Paris",
    input=lambda occurrence: Order(order_id=f"nightly-{occurrence.date()}"),
)

_here = sys.modules[__name__]
# retention=None: the operator commands are pinned against this module's own jobs and tasks.
app = xjobs.App(os.environ["XJOBS_CLI_TEST_URL"], jobs=[_here], tasks=[_here], retention=None)
