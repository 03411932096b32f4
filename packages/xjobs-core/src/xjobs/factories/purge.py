"""`purge()`: the retention sweep as a job over `job()` — one target per durable step, one clock reading per pass."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

from pydantic import BaseModel

from xjobs.clock import Clock, SystemClock
from xjobs.contract.retention import PurgeTarget
from xjobs.declare.job import JobHandle, job
from xjobs.declare.retry import Retry
from xjobs.errors import DeclarationInvalidError
from xjobs.names import DEFAULT_QUEUE, validate_job_name
from xjobs.run.context import JobContext

PURGE_JOB = "xjobs.purge"
CLOCK_STEP = "clock"


# How a pass runs one target: `(name, purge, now_ms)`; the job runs each as a durable step.
PassStep = Callable[[str, Callable[[int], Awaitable[int]], int], Awaitable[int]]


class PurgeInput(BaseModel):
    """A purge pass takes no input: what it deletes is the policy's, cut at the pass's clock."""


def _target_names(targets: Sequence[PurgeTarget]) -> list[str]:
    names: list[str] = []
    for target in targets:
        if not isinstance(target, PurgeTarget):
            raise DeclarationInvalidError(f"purge target {target!r} is not a PurgeTarget")
        name = validate_job_name(target.name, what="purge target")
        if name == CLOCK_STEP or name in names:
            raise DeclarationInvalidError(
                f"purge target name {name!r} is taken (by another target, or the clock step)"
            )
        names.append(name)
    if not names:
        raise DeclarationInvalidError("purge() needs at least one target")
    return names


async def _at_once(name: str, run: Callable[[int], Awaitable[int]], now_ms: int) -> int:
    return await run(now_ms)


async def purge_pass(
    targets: Sequence[PurgeTarget],
    now_ms: int,
    *,
    step: PassStep = _at_once,
    dry_run: bool = False,
) -> dict[str, int]:
    """The one purge pass: each target purged (or, with `dry_run`, counted) at `now_ms`, in
    order, through `step` (the purge job's durable step; here and now for `App.purge`); it
    answers what went per target. Duplicate target names are refused."""
    report: dict[str, int] = {}
    for name, target in zip(_target_names(targets), targets, strict=True):
        run = target.count_expired if dry_run else target.purge_expired
        report[name] = await step(name, run, now_ms)
    return report


def purge(
    targets: Sequence[PurgeTarget],
    *,
    clock: Clock | None = None,
    name: str = PURGE_JOB,
    queue: str = DEFAULT_QUEUE,
    timeout: timedelta | None = None,
) -> JobHandle[PurgeInput]:
    """The one caller of every target's `purge_expired`: a job whose pass reads the clock ONCE
    (a durable step, so a replay cuts at the same instant) and purges each target in a step of
    its own, named after it; it answers what went, per target. Duplicate names are refused.

    One live pass at a time: its idempotency key is constant (a cron task scopes it by occurrence).
    """
    targets = list(targets)
    _target_names(targets)
    read = clock or SystemClock()

    def now_ms() -> int:
        return read.now_ms()

    async def body(ctx: JobContext, _: PurgeInput) -> dict[str, int]:
        now = await ctx.step.run(CLOCK_STEP, now_ms)
        return await purge_pass(targets, now, step=ctx.step.run)

    return job(
        body,
        tenant="none",
        idempotency_key=lambda _: "purge",
        name=name,
        queue=queue,
        input_model=PurgeInput,
        retry=Retry(attempts=3),
        timeout=timeout,
    )
