"""Tutorial step 3: a failing attempt is retried with backoff; a `Terminal` error is not."""

import asyncio
from datetime import timedelta

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, Terminal, job


class Welcome(BaseModel):
    """A new user to welcome."""

    org_id: str
    email: str


@job(
    tenant=lambda w: w.org_id,
    idempotency_key=lambda w: w.email,
    retry=Retry(attempts=3, base=timedelta(seconds=2)),
)
async def send_welcome(ctx: JobContext, welcome: Welcome) -> None:
    """Send the welcome mail."""
    if "@" not in welcome.email:
        raise Terminal(f"{welcome.email!r} is no address")  # retrying cannot help: dead now
    if ctx.attempt == 1:
        raise ConnectionError("the mail server hung up")  # retried after the backoff
    print(f"welcome mail to {welcome.email} (attempt {ctx.attempt})")


app = xjobs.App(backend="postgresql://localhost/tutorial", jobs=[send_welcome])


async def main() -> None:
    """Enqueue a good and a bad welcome; run, wait out the backoff, run again."""
    async with app:
        good = await send_welcome.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        bad = await send_welcome.enqueue(Welcome(org_id="acme", email="nobody"))
        await app.run_worker(until_idle=True)  # both fail their first attempt
        await show(good.job_id, bad.job_id)
        await asyncio.sleep(2.5)  # the backoff: 1 to 2 s after attempt 1 (jittered)
        await app.run_worker(until_idle=True)  # attempt 2 of the good one
        await show(good.job_id, bad.job_id)


async def show(*job_ids: str) -> None:
    """Print each job's state and attempts."""
    for job_id in job_ids:
        found = await app.get_job(job_id)
        print(f"{found.state} after {found.attempt} attempt(s)")


asyncio.run(main())
