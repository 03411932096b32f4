"""The app the fleet test runs in real `xjobs worker` processes and enqueuing processes.

Each run appends one JSON line per event to `$XJOBS_FLEET_EFFECTS` (one `write` on an `O_APPEND`
descriptor, so lines of many processes never interleave): `start` when a run begins, `effect`
when its work is done.
"""

from __future__ import annotations

import asyncio
import json
import os

from pydantic import BaseModel

import xjobs

URL = os.environ.get("XJOBS_FLEET_URL", "memory://")


def record(event: str, job_id: str) -> None:
    """Append one event line to the effects file."""
    path = os.environ.get("XJOBS_FLEET_EFFECTS")
    if not path:
        return
    line = json.dumps({"ev": event, "job": job_id, "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class Item(BaseModel):
    """One unit of work."""

    key: str


@xjobs.job(tenant="none", idempotency_key=lambda item: item.key, queue="fleet")
async def work(ctx: xjobs.JobContext, item: Item) -> None:
    """Start, hold a moment, then record the effect."""
    record("start", ctx.job_id)
    await asyncio.sleep(0.05)
    record("effect", ctx.job_id)


app = xjobs.App(URL, jobs=[work])
