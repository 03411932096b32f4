"""`execute_job`: the one execution path — install the actor, validate, run under the signal, then settle."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from xjobs.actor import Actor, run_with_context
from xjobs.clock import Clock
from xjobs.contract.driver import WAIT_FOREVER_MS, Claim, ClaimedJob, JobDriver, Nack, Outcome
from xjobs.contract.stores import EventBus, StepStore
from xjobs.declare.job import JobHandle
from xjobs.declare.retry import is_terminal_error
from xjobs.errors import (
    DrainingError,
    JobCancelledError,
    LeaseLostError,
    SlotLostError,
    TimeoutExceededError,
    XJobsError,
)
from xjobs.payload import decode_input
from xjobs.run.context import JobContext
from xjobs.run.progress import ProgressThrottle
from xjobs.run.settled import Settled, SettledHook, announce_settled
from xjobs.run.signal import RunSignal
from xjobs.run.steps import StepApi, StepRun, StepSuspension

log = logging.getLogger("xjobs.run.execute")

MAX_ERROR_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Execution:
    """How one run ended: its outcome, whether the settle landed, and when a retry is due."""

    outcome: Outcome
    landed: bool
    error: str | None = None
    resume_at_ms: int | None = None


def describe_error(error: BaseException) -> str:
    """The `last_error` text: the error's type and message first, then its traceback, bounded."""
    head = f"{type(error).__name__}: {error}"
    if error.__traceback__ is None:
        return head[:MAX_ERROR_CHARS]
    frames = "".join(traceback.format_tb(error.__traceback__))
    return f"{head}\n{frames}".rstrip()[:MAX_ERROR_CHARS]


def _arm_deadline(handle: JobHandle[Any], signal: RunSignal) -> asyncio.TimerHandle | None:
    if handle.timeout_ms is None:
        return None
    error = TimeoutExceededError(
        f"job {handle.name!r} ran past its timeout of {handle.timeout_ms} ms"
    )
    return asyncio.get_running_loop().call_later(handle.timeout_ms / 1000, signal.abort, error)


async def _run_body(
    handle: JobHandle[Any], ctx: JobContext, value: Any, signal: RunSignal
) -> BaseException | None:
    """Run the body under the signal; answers the error it ended with, or `None` on success."""
    actor = Actor(org_id=ctx.tenant)
    body: asyncio.Task[object] = asyncio.ensure_future(
        run_with_context(actor, lambda: handle.fn(ctx, value))
    )
    signal.attach(body)
    deadline = _arm_deadline(handle, signal)
    try:
        await asyncio.wait({body})
    except asyncio.CancelledError:
        body.cancel()
        raise
    finally:
        if deadline is not None:
            deadline.cancel()
    if signal.reason is not None:
        return signal.reason
    if body.cancelled():
        return asyncio.CancelledError("the job body was cancelled")
    return body.exception()


def _nack_for(
    job: ClaimedJob, handle: JobHandle[Any], error: BaseException, now_ms: int
) -> tuple[Nack, Outcome]:
    """The retry decision, read from the error: a settle sits outside it."""
    text = describe_error(error)
    if isinstance(error, DrainingError | SlotLostError):
        outcome: Outcome = "interrupted" if isinstance(error, DrainingError) else "retried"
        return Nack("retry", text, now_ms, counts_as_attempt=False), outcome
    if is_terminal_error(error) or job.attempt >= job.max_attempts:
        if job.dead_letter:
            return Nack("dead", text), "dead-lettered"
        return Nack("fail", text), "dropped"
    return Nack("retry", text, now_ms + handle.retry.delay_ms(job.attempt)), "retried"


async def execute_job(
    handle: JobHandle[Any],
    job: ClaimedJob,
    *,
    driver: JobDriver,
    clock: Clock,
    signal: RunSignal,
    hooks: tuple[SettledHook, ...] = (),
    refusal: XJobsError | None = None,
    steps: StepStore | None = None,
    events: EventBus | None = None,
    ack: Callable[[Claim], Awaitable[bool]] | None = None,
) -> Execution:
    """Run one claimed job to its settle; a `refusal` fails the attempt without running the body.

    `ack` lands a completion (a worker's `AckBatcher.ack`); by default `driver.ack`.

    Never raises for the job's own failure.
    """
    claim = job.claim
    progress = ProgressThrottle(clock, lambda v: driver.record_progress(claim, v))
    step = StepApi(
        StepRun(claim, job.run_id, job.queue, handle.step_timeout_ms),
        store=steps,
        events=events,
        clock=clock,
        signal=signal,
    )
    error: BaseException | None = refusal
    tenant: str | None = None
    try:
        if refusal is not None:
            raise refusal
        value = decode_input(handle.input_model, job.payload, job=handle.name)
        tenant = handle.tenant_for(value)
        ctx = JobContext(
            job_id=job.id,
            run_id=job.run_id,
            name=job.name,
            queue=job.queue,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            final_attempt=job.attempt >= job.max_attempts,
            tenant=tenant,
            enqueued_by=job.enqueued_by,
            traceparent=job.traceparent,
            step=step,
            _progress=progress,
            _signal=signal,
        )
        error = await _run_body(handle, ctx, value, signal)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # input or tenant refused: the attempt fails, the round goes on
        error = exc
    if isinstance(error, StepSuspension):
        await _flush(progress, job)
        return await _park(handle, job, error, driver=driver, events=events, clock=clock)
    return await _settle(
        handle,
        job,
        error,
        tenant,
        driver=driver,
        ack=ack or driver.ack,
        clock=clock,
        progress=progress,
        hooks=hooks,
    )


async def _park(
    handle: JobHandle[Any],
    job: ClaimedJob,
    suspension: StepSuspension,
    *,
    driver: JobDriver,
    events: EventBus | None,
    clock: Clock,
) -> Execution:
    """A suspension parks the job (`waiting`, uncounted): until its wake time, or its event.

    A run waiting for an event is due again after `event_poll` when the job declares one.
    """
    run_at = suspension.resume_at_ms
    wait = suspension.wait
    if wait is not None and handle.event_poll_ms is not None:
        run_at = min(run_at, clock.now_ms() + handle.event_poll_ms)
    if wait is not None and events is not None:
        landed = await events.park(job.claim, wait, run_at)
    else:
        landed = await driver.nack(job.claim, Nack("park", None, run_at, counts_as_attempt=False))
    if not landed:
        log.warning(
            "jobs.settle.unowned", extra={"job_id": job.id, "job": job.name, "outcome": "suspended"}
        )
        return Execution("lease-lost", landed=False)
    log.info(
        "jobs.run.suspended", extra={"job_id": job.id, "job": job.name, "step": suspension.step}
    )
    resume_at = None if run_at >= WAIT_FOREVER_MS else run_at
    return Execution("suspended", landed=True, resume_at_ms=resume_at)


async def _settle(
    handle: JobHandle[Any],
    job: ClaimedJob,
    error: BaseException | None,
    tenant: str | None,
    *,
    driver: JobDriver,
    ack: Callable[[Claim], Awaitable[bool]],
    clock: Clock,
    progress: ProgressThrottle,
    hooks: tuple[SettledHook, ...],
) -> Execution:
    claim = job.claim
    if isinstance(error, LeaseLostError | JobCancelledError):
        # The claim moved on (or an operator cancelled): this run writes nothing more.
        outcome: Outcome = "cancelled" if isinstance(error, JobCancelledError) else "lease-lost"
        return Execution(outcome, landed=False, error=describe_error(error))
    await _flush(progress, job)
    if error is None:
        landed = await ack(claim)
        outcome, text, nack = "completed", None, None
    else:
        nack, outcome = _nack_for(job, handle, error, clock.now_ms())
        text = nack.error
        landed = await driver.nack(claim, nack)
    if not landed:
        log.warning(
            "jobs.settle.unowned", extra={"job_id": job.id, "job": job.name, "outcome": outcome}
        )
        return Execution("lease-lost", landed=False, error=text)
    event = Settled(job.id, job.run_id, job.name, job.queue, outcome, job.attempt, tenant, text)
    await announce_settled(hooks, event)
    resume_at = nack.run_at_ms if nack is not None and nack.kind == "retry" else None
    return Execution(outcome, landed=True, error=text, resume_at_ms=resume_at)


async def _flush(progress: ProgressThrottle, job: ClaimedJob) -> None:
    try:
        await progress.flush()
    except Exception:
        log.warning("jobs.progress.flush-failed", extra={"job_id": job.id}, exc_info=True)
