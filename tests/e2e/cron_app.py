"""The scheduler e2e tests' app: a task firing every minute, on the backend `$XJOBS_E2E_URL` names."""

from __future__ import annotations

import os

from pydantic import BaseModel

import xjobs


class Minute(BaseModel):
    at: str


@xjobs.job(tenant="none", idempotency_key=lambda value: value.at, queue="cron-e2e")
async def minutely_report(ctx: xjobs.JobContext, value: Minute) -> None:
    """The job the task fires; no worker runs it in these tests (the job rows are the evidence)."""


every_minute = xjobs.task(
    job=minutely_report,
    cron="* * * * *",
    tz="Europe/Paris",
    input=lambda occurrence: Minute(at=occurrence.isoformat()),
    catch_up="all",
    name="report.every_minute",
)

# retention=None: the scenario counts the fires of its one task, not the default purge task's
app = xjobs.App(os.environ.get("XJOBS_E2E_URL", "memory://"), tasks=[every_minute], retention=None)
