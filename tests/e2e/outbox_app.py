"""The outbox e2e tests' app: a receipt job staged with the order, relayed into `$XJOBS_E2E_URL`.

`$XJOBS_E2E_OUTBOX` names the outbox's Postgres when it is not the queue backend itself. With
`$XJOBS_E2E_CRASH_AFTER_PUBLISH` set, the relay's first publish writes that file and then hangs,
before the rows are marked — for the test to `kill -9` the relay at exactly that point.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

import xjobs


class Order(BaseModel):
    order_id: str


def _append(path: str, line: str) -> None:
    with Path(path).open("a") as out:
        out.write(f"{line}\n")


@xjobs.job(tenant="none", idempotency_key=lambda order: order.order_id, queue="receipts")
async def send_receipt(ctx: xjobs.JobContext, order: Order) -> None:
    """Appends the order id to `$XJOBS_E2E_CALLS`: the test counts how often each one ran."""
    _append(os.environ["XJOBS_E2E_CALLS"], order.order_id)


class CrashAfterPublishApp(xjobs.App):
    """An app whose queue backend hangs right after its first publish lands (a fault injection)."""

    async def open(self) -> xjobs.App:
        await super().open()
        marker = os.environ.get("XJOBS_E2E_CRASH_AFTER_PUBLISH")
        if marker:
            jobs = self.backend.jobs
            publish = jobs.enqueue

            async def enqueue_then_hang(rows: object) -> object:
                results = await publish(rows)  # type: ignore[arg-type]
                _append(marker, "published")
                await asyncio.Event().wait()  # never marks: the test kills the process here
                return results

            jobs.enqueue = enqueue_then_hang  # type: ignore[method-assign,assignment]
        return self


app = CrashAfterPublishApp(
    os.environ.get("XJOBS_E2E_URL", "memory://"),
    jobs=[send_receipt],
    outbox=os.environ.get("XJOBS_E2E_OUTBOX") or None,
)
