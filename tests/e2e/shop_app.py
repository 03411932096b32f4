"""A user's app as the e2e tests run it: charge a card (fails once, retried), then send a receipt.

Nothing in it names an engine except the URL it is configured with: `$SHOP_BACKEND_URL`.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

from pydantic import BaseModel

import xjobs


class Order(BaseModel):
    order_id: str
    cents: int


charges: list[tuple[str, int]] = []  # (order id, attempt) of every charge attempt
receipts: dict[str, str] = {}  # order id -> the receipt job's id


@xjobs.job(
    tenant="none",
    idempotency_key=lambda o: o.order_id,
    retry=xjobs.Retry(attempts=2, base=timedelta(0), cap=timedelta(0)),
)
async def charge_card(ctx: xjobs.JobContext, order: Order) -> None:
    charges.append((order.order_id, ctx.attempt))
    if ctx.attempt == 1:
        raise ConnectionError("the card processor timed out")
    await send_receipt.enqueue(order)


@xjobs.job(tenant="none", idempotency_key=lambda o: f"receipt:{o.order_id}")
async def send_receipt(ctx: xjobs.JobContext, order: Order) -> None:
    receipts[order.order_id] = ctx.job_id


app = xjobs.App(
    backend=os.environ.get("SHOP_BACKEND_URL", "memory://"), jobs=[sys.modules[__name__]]
)
