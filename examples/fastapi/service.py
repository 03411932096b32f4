"""A FastAPI service that enqueues a job from one route and reads its result from another.

Run it with `XJOBS_URL=postgresql://… uvicorn service:api` (and `xjobs worker service:jobs`
beside it), or set `XJOBS_IN_PROCESS_WORKER=1` to run the worker inside the service.
"""

from __future__ import annotations

import os
from datetime import timedelta

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import xjobs
from xjobs.asgi import lifespan
from xjobs.errors import JobFailedError, JobNotFoundError, ResultTimeoutError


class Order(BaseModel):
    """An order to charge."""

    order_id: str
    amount_cents: int


class Receipt(BaseModel):
    """What a charge answers."""

    order_id: str
    charged_cents: int


@xjobs.job(tenant="none", idempotency_key=lambda o: o.order_id, queue="orders")
async def charge(ctx: xjobs.JobContext, order: Order) -> Receipt:
    """Charge an order (a real service would call its payment provider here)."""
    if order.amount_cents <= 0:
        raise xjobs.Terminal(f"nothing to charge for order {order.order_id}")  # no retry
    return Receipt(order_id=order.order_id, charged_cents=order.amount_cents)


def create_service(url: str, *, in_process_worker: bool = False) -> tuple[FastAPI, xjobs.App]:
    """The service and its xjobs `App`, open while the service runs."""
    jobs = xjobs.App(url, jobs=[charge])
    api = FastAPI(lifespan=lifespan(jobs, worker=in_process_worker))

    @api.post("/orders", status_code=202)
    async def place(order: Order) -> dict[str, str]:
        enqueued = await charge.enqueue(order)
        return {"job_id": enqueued.job_id}

    @api.get("/orders/{job_id}/receipt")
    async def receipt(job_id: str, wait: float = 1.0) -> Receipt:
        try:
            return await charge.result(job_id, timeout=timedelta(seconds=wait))  # type: ignore[no-any-return]
        except JobNotFoundError:
            raise HTTPException(404, "no such order job") from None
        except ResultTimeoutError:
            raise HTTPException(409, "not charged yet") from None
        except JobFailedError as exc:
            raise HTTPException(422, f"the charge failed: {exc}") from None

    return api, jobs


api, jobs = create_service(
    os.environ.get("XJOBS_URL", "memory://"),
    in_process_worker=os.environ.get("XJOBS_IN_PROCESS_WORKER") == "1",
)
