"""The many-hosts e2e test's app: a counted job for the workers, three minutely tasks for the schedulers.

Every run appends one line (`<job id> <attempt> <pid>`) to `$XJOBS_E2E_RUNS` with one `write` on an
`O_APPEND` descriptor, so lines from the four worker processes never interleave. The schedulers'
clock is the wall clock shifted by `$XJOBS_E2E_CLOCK_OFFSET_MS`, so a whole minute falls while
the jobs run instead of up to a minute later.
"""

from __future__ import annotations

import os
import time

from pydantic import BaseModel

import xjobs

URL = os.environ.get("XJOBS_E2E_URL", "memory://")
QUEUE = "many-hosts"
CRON_QUEUE = "many-hosts-cron"
TASKS = ("cron.utc", "cron.paris", "cron.kolkata")


def record_run(job_id: str, attempt: int) -> None:
    """Append this run's line to the runs file."""
    path = os.environ.get("XJOBS_E2E_RUNS")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job_id} {attempt} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


class Item(BaseModel):
    n: int


@xjobs.job(tenant="none", idempotency_key=lambda item: str(item.n), queue=QUEUE)
async def count_item(ctx: xjobs.JobContext, item: Item) -> None:
    """Records the run."""
    record_run(ctx.job_id, ctx.attempt)


class Tick(BaseModel):
    task: str
    at: str


@xjobs.job(tenant="none", idempotency_key=lambda tick: f"{tick.task}@{tick.at}", queue=CRON_QUEUE)
async def count_tick(ctx: xjobs.JobContext, tick: Tick) -> None:
    """Records the run of one occurrence."""
    record_run(ctx.job_id, ctx.attempt)


def minutely(name: str, tz: str) -> xjobs.TaskHandle:
    """A task firing `count_tick` every minute in `tz`, catching up every missed occurrence."""
    return xjobs.task(
        job=count_tick,
        cron="* * * * *",
        tz=tz,
        input=lambda occurrence: Tick(task=name, at=occurrence.isoformat()),
        catch_up="all",
        name=name,
    )


class OffsetClock:
    """The wall clock shifted by `$XJOBS_E2E_CLOCK_OFFSET_MS` (the same in both schedulers)."""

    def __init__(self) -> None:
        self.offset_ms = int(os.environ.get("XJOBS_E2E_CLOCK_OFFSET_MS", "0"))

    def now_ms(self) -> int:
        """The shifted instant in epoch milliseconds."""
        return time.time_ns() // 1_000_000 + self.offset_ms


TASK_HANDLES = [
    minutely(name, tz)
    for name, tz in zip(TASKS, ("UTC", "Europe/Paris", "Asia/Kolkata"), strict=True)
]
app = xjobs.App(URL, jobs=[count_item, count_tick])
# retention=None: the scenario counts the fires of its own tasks, not the default purge task's
cron_app = xjobs.App(
    URL, jobs=[count_tick], tasks=TASK_HANDLES, clock=OffsetClock(), retention=None
)
