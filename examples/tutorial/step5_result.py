"""Tutorial step 5: a job's return value, awaited by the caller that enqueued it."""

import asyncio
from datetime import timedelta

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job


class QuoteRequest(BaseModel):
    """An org asks what some seats cost."""

    org_id: str
    seats: int


class Quote(BaseModel):
    """What the seats cost, in cents."""

    seats: int
    cents: int


@job(tenant=lambda r: r.org_id, idempotency_key=lambda r: f"{r.org_id}:{r.seats}")
async def price(ctx: JobContext, request: QuoteRequest) -> Quote:
    """Price the seats."""
    return Quote(seats=request.seats, cents=request.seats * 900)


app = xjobs.App(backend="postgresql://localhost/tutorial", jobs=[price])


async def main() -> None:
    """Enqueue a quote and wait for its result while a worker runs it."""
    async with app:
        enqueued = await price.enqueue(QuoteRequest(org_id="acme", seats=12))
        # the caller waits for the result while a worker (here, in this process) runs the job
        waiting = asyncio.create_task(price.result(enqueued.job_id, timeout=timedelta(seconds=30)))
        await app.run_worker(until_idle=True)
        quote = await waiting
        print(type(quote).__name__, quote.seats, quote.cents)


asyncio.run(main())
