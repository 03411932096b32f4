"""Tutorial step 2: the same app on Postgres: only the URL changes."""

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


app = xjobs.App(backend="postgresql://localhost/tutorial", jobs=[send_welcome])


async def main() -> None:
    """Enqueue two welcomes and run them."""
    async with app:  # the first open installs the schema (idempotent)
        await send_welcome.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        await send_welcome.enqueue(Welcome(org_id="acme", email="grace@acme.test"))
        stats = await app.run_worker(until_idle=True)
        print("completed:", stats.completed)


if __name__ == "__main__":
    asyncio.run(main())
