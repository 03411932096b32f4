"""The app the dashboard and MCP tests serve (as `webapp:app`); its backend URL comes from
`XJOBS_WEB_TEST_URL`, so one module serves memory, Postgres and Redis."""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel

import xjobs


class Export(BaseModel):
    org: str
    report: str
    token: str = "s3cret-warehouse-token"


class Mail(BaseModel):
    to: str


# report names whose export fails (a test adds and clears them)
FAILING: set[str] = set()


@xjobs.job(
    tenant=lambda e: e.org,
    idempotency_key=lambda e: f"{e.org}:{e.report}",
    queue="reports",
    retry=xjobs.Retry(attempts=1),
    redact_input=lambda e: {"org": e.org, "report": e.report, "token": "****"},
)
async def export(ctx: xjobs.JobContext, input: Export) -> None:
    await ctx.step.run("gather", _gather, input.report)
    await ctx.progress(0.5)
    await ctx.step.sleep("cool-down", 0)
    if input.report in FAILING:
        raise TimeoutError("the warehouse did not answer within 30s")
    await ctx.step.run("upload", _gather, input.report)


async def _gather(report: str) -> dict[str, str]:
    return {"rows": report}


@xjobs.job(tenant="none", idempotency_key=lambda m: m.to, queue="mail")
async def send_mail(ctx: xjobs.JobContext, input: Mail) -> None:
    """Always completes."""


# opened by the test that wants a job to stay running (set on the server's loop)
GATE = asyncio.Event()


@xjobs.job(tenant="none", idempotency_key=lambda m: m.to, queue="slow")
async def hold(ctx: xjobs.JobContext, input: Mail) -> None:
    """Runs until GATE opens."""
    await GATE.wait()


nightly = xjobs.task(
    job=export,
    cron="0 3 * * *",
    tz="Europe/Paris",
    input=lambda occurrence: Export(org="acme", report=f"nightly-{occurrence.date()}"),
)

_here = sys.modules[__name__]
# retention=None: the pages are pinned against this module's own jobs and tasks.
app = xjobs.App(os.environ["XJOBS_WEB_TEST_URL"], jobs=[_here], tasks=[_here], retention=None)
