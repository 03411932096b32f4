"""Tutorial step 1: a durable job on SQLite, enqueued by one app and run by another."""

import asyncio

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job


class Welcome(BaseModel):
    """A new user to welcome."""

    org_id: str
    email: str


@job(tenant=lambda w: w.org_id, idempotency_key=lambda w: w.email)
async def send_welcome(ctx: JobContext, welcome: Welcome) -> None:
    """Send the welcome mail."""
    print(f"welcome mail to {welcome.email} (attempt {ctx.attempt})")


app = xjobs.App(backend="sqlite:///tutorial.db", jobs=[send_welcome])


async def main() -> None:
    """Enqueue in one app, run the job in another."""
    async with app:  # the service: enqueues and returns at once
        enqueued = await send_welcome.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        print("enqueued, new:", not enqueued.deduped)
        again = await send_welcome.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        print("same key again, new:", not again.deduped)
    async with app:  # later, another process: the job is still in tutorial.db
        stats = await app.run_worker(until_idle=True)
        print("completed:", stats.completed)


asyncio.run(main())
