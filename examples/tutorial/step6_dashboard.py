"""Tutorial step 6: the dashboard, mounted in the service behind basic auth, asked for a page."""

import asyncio

import httpx
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job
from xjobs_web import basic_auth, dashboard


class Welcome(BaseModel):
    """A new user to welcome."""

    org_id: str
    email: str


@job(tenant=lambda w: w.org_id, idempotency_key=lambda w: w.email)
async def send_welcome(ctx: JobContext, welcome: Welcome) -> None:
    """Send the welcome mail."""
    print(f"welcome mail to {welcome.email}")


app = xjobs.App(backend="postgresql://localhost/tutorial", jobs=[send_welcome])
# an ASGI app: mount it in the service (Starlette, FastAPI) or serve it with uvicorn
admin = dashboard(app, auth=basic_auth("admin", "s3cret"))


async def main() -> None:
    """Enqueue a job, then read the jobs page without and with credentials."""
    async with app:
        await send_welcome.enqueue(Welcome(org_id="acme", email="ada@acme.test"))
        transport = httpx.ASGITransport(app=admin)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            anonymous = await client.get("/jobs")
            print("without credentials:", anonymous.status_code)
            page = await client.get("/jobs", auth=("admin", "s3cret"))
            print("as admin:", page.status_code, "send_welcome" in page.text)


asyncio.run(main())
