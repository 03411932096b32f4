"""Tutorial step 4: a durable step runs once; a retried attempt replays its stored result."""

import asyncio
from datetime import timedelta

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job


class Welcome(BaseModel):
    """A new user to welcome."""

    org_id: str
    email: str


async def create_account(email: str) -> str:
    """Create the user's account; answers its id."""
    print(f"account created for {email}")  # runs once, whatever happens after it
    return f"acct_{email.split('@')[0]}"


async def send_mail(email: str, account: str) -> None:
    """Send the welcome mail for the account."""
    print(f"welcome mail to {email} for {account}")


@job(
    tenant=lambda w: w.org_id,
    idempotency_key=lambda w: w.email,
    retry=Retry(attempts=3, base=timedelta(milliseconds=200)),
)
async def onboard(ctx: JobContext, welcome: Welcome) -> None:
    """Create the account (once), then send the mail."""
    account = await ctx.step.run("create-account", create_account, welcome.email)
    if ctx.attempt == 1:
        raise ConnectionError("the mail server hung up")
    await ctx.step.run("mail", send_mail, welcome.email, account)


app = xjobs.App(backend="postgresql://localhost/tutorial", jobs=[onboard])


async def main() -> None:
    """Run the job twice: the failed attempt, then the replay."""
    async with app:
        enqueued = await onboard.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        await app.run_worker(until_idle=True)  # creates the account, then fails
        await asyncio.sleep(0.3)
        await app.run_worker(until_idle=True)  # replays create-account, sends the mail
        print((await app.get_job(enqueued.job_id)).state)


asyncio.run(main())
