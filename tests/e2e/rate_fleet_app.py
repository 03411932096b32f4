"""The rate-fleet e2e test's app: one job limited to 50 starts a second on one key, fleet-wide.

Every run appends its wall-clock start (`<time.time()> <pid>`) to `$XJOBS_E2E_RUNS` with one
`write` on an `O_APPEND` descriptor, so lines from the three worker processes never interleave.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from pydantic import BaseModel

import xjobs

URL = os.environ.get("XJOBS_E2E_URL", "memory://")
QUEUE = "rate-fleet"
LIMIT = 50
PER = timedelta(seconds=1)


class Send(BaseModel):
    org: str
    n: int


def record_start() -> None:
    """Append this run's start line to the runs file."""
    path = os.environ.get("XJOBS_E2E_RUNS")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{time.time():.6f} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


@xjobs.job(
    tenant=lambda send: send.org,
    idempotency_key=lambda send: str(send.n),
    queue=QUEUE,
    rate=xjobs.Rate(limit=LIMIT, per=PER, key=lambda send: send.org),
)
async def send(ctx: xjobs.JobContext, item: Send) -> None:
    """Records the start of the run."""
    record_start()


app = xjobs.App(URL, jobs=[send])
