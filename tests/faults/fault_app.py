"""The fault suite's app, as real `xjobs worker|scheduler|relay` processes run it.

Every body appends one JSON line per event to `$XJOBS_FAULT_EFFECTS` (one `write` on an
`O_APPEND` descriptor, so lines from many processes never interleave): `start` when a run begins,
`effect` when its work is done (the row the ledger counts: one per (job id, run)), `step` inside a
durable step, `fault` when the body itself is the fault (it blocked its event loop). A test reads
the file to count runs per job. Markers (`$XJOBS_FAULT_MARKERS/<name>`) tell a test that a run
reached the point where it wants to strike.

Fault hooks, read from the environment when the app opens (the test sets them per process):

- `XJOBS_FAULT_SETTLE=before:<job id>` — the worker's ack of that job writes the marker
  `settle-<job id>` and hangs BEFORE the ack reaches the store; `after:<job id>` hangs right AFTER
  the ack landed. The test kills the worker there.
- `XJOBS_FAULT_CRASH_AFTER_PUBLISH=1` — the relay's first publish lands, writes the marker
  `published`, and hangs before the outbox rows are marked.
- `XJOBS_FAULT_CLOCK_OFFSET_MS` — `cron_app`'s clock runs this many ms off the wall clock (the
  same offset in every scheduler process), so a minute boundary falls a few seconds after start.
- `XJOBS_FAULT_CLOCK_JUMP_FILE` — where libfaketime is not installed, the process's wall clock
  (`time.time`, `time.time_ns`) is shifted by the seconds that file holds (`+3600`, `-300`),
  read again on every call: the test jumps the clock of a running process by rewriting it.
  (With libfaketime the harness preloads it instead, which shifts every wall-clock reading.)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import xjobs


def _jump_wall_clock(path: str) -> None:
    """Shift this process's `time.time` and `time.time_ns` by the seconds `path` holds."""
    real_time, real_ns = time.time, time.time_ns

    def offset_s() -> float:
        try:
            return float(Path(path).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0.0

    time.time = lambda: real_time() + offset_s()
    time.time_ns = lambda: real_ns() + int(offset_s() * 1e9)


if os.environ.get("XJOBS_FAULT_CLOCK_JUMP_FILE"):
    _jump_wall_clock(os.environ["XJOBS_FAULT_CLOCK_JUMP_FILE"])

URL = os.environ.get("XJOBS_FAULT_URL", "memory://")
QUEUE = "faults"
CRON_QUEUE = "cron"
FAST_RETRY = xjobs.Retry(
    attempts=5, base=timedelta(milliseconds=200), cap=timedelta(milliseconds=500)
)
TWO_TRIES = xjobs.Retry(attempts=2, base=timedelta(0), cap=timedelta(0))


def record(event: str, job_id: str, key: str, attempt: int, **extra: Any) -> None:
    """Append one event line to the effects file (a single write on an O_APPEND descriptor)."""
    path = os.environ.get("XJOBS_FAULT_EFFECTS")
    if not path:
        return
    row = {"ev": event, "job": job_id, "key": key, "attempt": attempt, "pid": os.getpid()}
    row.update(extra)
    row["at"] = time.time()
    line = (json.dumps(row, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def mark(name: str, text: str = "") -> None:
    """Create the marker `name` for the test to see."""
    folder = os.environ.get("XJOBS_FAULT_MARKERS")
    if folder:
        Path(folder, name).write_text(text)


class Work(BaseModel):
    """One unit of work: `hold_s` of awaited work before its effect; `block_s` of `time.sleep`
    (the event loop blocked, no heartbeat) on the first attempt only."""

    key: str
    hold_s: float = 0.0
    block_s: float = 0.0
    stubborn: bool = False  # `forever` swallows its cancellation


@xjobs.job(tenant="none", idempotency_key=lambda w: w.key, queue=QUEUE, retry=FAST_RETRY)
async def work(ctx: xjobs.JobContext, w: Work) -> None:
    """Run, hold, then record the effect."""
    record("start", ctx.job_id, w.key, ctx.attempt)
    if w.block_s and ctx.attempt == 1:
        started = time.time()
        time.sleep(w.block_s)  # noqa: ASYNC251 - the fault: a body blocking its event loop
        record("fault", ctx.job_id, w.key, ctx.attempt, kind="blocked-loop", start=started)
    if w.hold_s:
        await asyncio.sleep(w.hold_s)
    record("effect", ctx.job_id, w.key, ctx.attempt)


class Flow(BaseModel):
    """A three-step workflow; its first attempt hangs inside step three."""

    key: str


def _step(name: str, job_id: str, key: str, attempt: int) -> str:
    record("step", job_id, key, attempt, step=name)
    return f"{name}-done"


async def _hang_in_three(job_id: str, key: str, attempt: int) -> str:
    record("step-start", job_id, key, attempt, step="three")
    if attempt == 1:
        mark(f"in-three-{job_id}")
        await asyncio.sleep(3600)  # the test kills the worker here, mid-step
    return _step("three", job_id, key, attempt)


@xjobs.job(tenant="none", idempotency_key=lambda f: f.key, queue=QUEUE, retry=FAST_RETRY)
async def workflow(ctx: xjobs.JobContext, f: Flow) -> None:
    """Steps one and two are recorded; step three hangs on attempt 1 until the worker dies."""
    record("start", ctx.job_id, f.key, ctx.attempt)
    await ctx.step.run("one", _step, "one", ctx.job_id, f.key, ctx.attempt)
    await ctx.step.run("two", _step, "two", ctx.job_id, f.key, ctx.attempt)
    await ctx.step.run("three", _hang_in_three, ctx.job_id, f.key, ctx.attempt)
    record("effect", ctx.job_id, f.key, ctx.attempt)


class Hog(BaseModel):
    """A body that allocates `chunk_mb` at a time, touching every page, until it cannot."""

    key: str
    chunk_mb: int = 32


@xjobs.job(tenant="none", idempotency_key=lambda h: h.key, queue=QUEUE, retry=TWO_TRIES)
async def hog(ctx: xjobs.JobContext, h: Hog) -> None:
    """Never finishes: it grows until the address space limit (MemoryError) or a kill stops it."""
    record("start", ctx.job_id, h.key, ctx.attempt)
    mark(f"hogging-{ctx.job_id}-{ctx.attempt}", str(os.getpid()))
    held: list[bytearray] = []
    while True:
        chunk = bytearray(h.chunk_mb << 20)
        chunk[::4096] = b"\x01" * len(range(0, len(chunk), 4096))  # touch every page
        held.append(chunk)
        await asyncio.sleep(0.01)


@xjobs.job(
    tenant="none",
    idempotency_key=lambda w: w.key,
    queue=QUEUE,
    retry=TWO_TRIES,
    timeout=timedelta(seconds=1),
)
async def forever(ctx: xjobs.JobContext, w: Work) -> None:
    """Never returns on its own: the job's `timeout` must cancel it (a stubborn one swallows the
    cancellation and goes on waiting)."""
    record("start", ctx.job_id, w.key, ctx.attempt)
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if not w.stubborn:
                raise
            record("cancel-ignored", ctx.job_id, w.key, ctx.attempt)


class Tick(BaseModel):
    """The input a cron occurrence builds."""

    at: str


@xjobs.job(tenant="none", idempotency_key=lambda t: t.at, queue=CRON_QUEUE)
async def tick(ctx: xjobs.JobContext, t: Tick) -> None:
    """Records that the occurrence ran."""
    record("effect", ctx.job_id, t.at, ctx.attempt)


every_minute = xjobs.task(
    job=tick,
    cron="* * * * *",
    tz="UTC",
    input=lambda occurrence: Tick(at=occurrence.isoformat()),
    catch_up="all",
    name="faults.every_minute",
)


class OffsetClock:
    """The wall clock shifted by `$XJOBS_FAULT_CLOCK_OFFSET_MS` (the same in every scheduler)."""

    def __init__(self) -> None:
        self.offset_ms = int(os.environ.get("XJOBS_FAULT_CLOCK_OFFSET_MS", "0"))

    def now_ms(self) -> int:
        """The shifted instant in epoch milliseconds."""
        return time.time_ns() // 1_000_000 + self.offset_ms


def _settle_hook(app: xjobs.App, spec: str) -> None:
    """Hang the worker's ack of one job before (or after) it reaches the store."""
    when, job_id = spec.split(":", 1)
    jobs: Any = app.backend.jobs

    def wrap(name: str) -> None:
        real = getattr(jobs, name)

        async def hooked(arg: Any) -> Any:
            claims = arg if isinstance(arg, Sequence) else [arg]
            if not any(c.job_id == job_id for c in claims):
                return await real(arg)
            if when == "before":
                mark(f"settle-{job_id}", str(time.time()))
                await asyncio.Event().wait()  # killed here: the ack never reaches the store
            result = await real(arg)
            mark(f"settle-{job_id}", str(time.time()))
            await asyncio.Event().wait()  # killed here: the ack landed, the worker never knew
            return result

        setattr(jobs, name, hooked)

    wrap("ack")
    if hasattr(jobs, "ack_many"):
        wrap("ack_many")


def _publish_hook(app: xjobs.App) -> None:
    """The relay's first publish lands, then the relay hangs before marking the rows."""
    jobs: Any = app.backend.jobs
    publish = jobs.enqueue

    async def enqueue_then_hang(rows: Any) -> Any:
        results = await publish(rows)
        mark("published", json.dumps([row.id for row in rows]))
        await asyncio.Event().wait()  # killed here: published, never marked
        return results

    jobs.enqueue = enqueue_then_hang


class FaultApp(xjobs.App):
    """An app whose backend gets the fault hooks its process was started with."""

    async def open(self) -> xjobs.App:
        """Open, then install the hooks named by the environment."""
        await super().open()
        settle = os.environ.get("XJOBS_FAULT_SETTLE")
        if settle:
            _settle_hook(self, settle)
        if os.environ.get("XJOBS_FAULT_CRASH_AFTER_PUBLISH"):
            _publish_hook(self)
        return self


JOBS = [work, workflow, hog, forever, tick]

app = FaultApp(URL, jobs=JOBS)
# retention=None on the cron apps: the scenarios count their one task's fires, and the default
# purge task fires on every fifth minute's occurrence beside it
cron_app = FaultApp(URL, jobs=[tick], tasks=[every_minute], clock=OffsetClock(), retention=None)
# the same task on the system clock: a skew comes from the process's own wall clock (faketime)
skew_app = FaultApp(URL, jobs=[tick], tasks=[every_minute], retention=None)


def minute_floor(epoch_s: float) -> datetime:
    """The whole minute at or before `epoch_s` (UTC), as the occurrence the task builds."""
    from datetime import UTC

    return datetime.fromtimestamp(int(epoch_s // 60 * 60), UTC)
