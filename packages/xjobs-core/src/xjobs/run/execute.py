"""`execute_job`: the one execution path — the run's context, the body under its signal, then the settle room."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from xjobs.actor import Actor, run_with_context
from xjobs.clock import Clock
from xjobs.contract.stores import EventBus, StepStore
from xjobs.declare.job import JobHandle
from xjobs.errors import JobCancelledError, LeaseLostError, TimeoutExceededError, XJobsError
from xjobs.run.context import JobContext, SyncJobContext
from xjobs.run.progress import ProgressThrottle
from xjobs.run.record import RunRecord
from xjobs.run.settle import Execution, Holds, Settler, flush_quietly
from xjobs.run.signal import RunSignal
from xjobs.run.steps import StepApi, StepRun
from xjobs.run.threads import BodyThreads


def _arm_deadline(handle: JobHandle[Any], signal: RunSignal) -> asyncio.TimerHandle | None:
    if handle.timeout_ms is None:
        return None
    error = TimeoutExceededError(
        f"job {handle.name!r} ran past its timeout of {handle.timeout_ms} ms"
    )
    return asyncio.get_running_loop().call_later(handle.timeout_ms / 1000, signal.abort, error)


async def _run_body(
    handle: JobHandle[Any],
    ctx: JobContext | SyncJobContext,
    value: Any,
    signal: RunSignal,
    threads: BodyThreads,
) -> tuple[BaseException | None, object]:
    """Run the body under the signal (a plain `def` on a thread); answers the error it ended with
    (`None` on success) and what it returned."""
    actor = Actor(org_id=ctx.tenant)

    def start() -> Awaitable[object]:
        if handle.sync:
            return threads.run(handle.fn, ctx, value)
        return handle.fn(ctx, value)  # type: ignore[arg-type, return-value]

    body: asyncio.Task[object] = asyncio.ensure_future(run_with_context(actor, start))
    signal.attach(body)
    deadline = _arm_deadline(handle, signal)
    try:
        await body
    except asyncio.CancelledError:
        # The body's own cancellation (the signal's) is read below; the run's is passed on.
        if not body.done() or _cancelling():
            body.cancel()
            raise
    except BaseException:  # the body's error (a suspension too) is read from its task below
        if not body.done():
            raise
    finally:
        if deadline is not None:
            deadline.cancel()
    if signal.reason is not None:
        return signal.reason, None
    if body.cancelled():
        return asyncio.CancelledError("the job body was cancelled"), None
    error = body.exception()
    return error, None if error is not None else body.result()


def _cancelling() -> int:
    """How many cancellations of the running task are pending (the run's, not its body's)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


def _identity(run: RunRecord) -> dict[str, Any]:
    """What both contexts open with: job id, run id, name, queue, attempts, tenant, attribution."""
    job = run.job
    return {
        "job_id": job.id,
        "run_id": job.run_id,
        "name": job.name,
        "queue": job.queue,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "final_attempt": job.attempt >= job.max_attempts,
        "tenant": run.tenant,
        "enqueued_by": job.enqueued_by,
        "traceparent": job.traceparent,
    }


async def execute_job(
    run: RunRecord,
    *,
    settler: Settler,
    clock: Clock,
    signal: RunSignal,
    refusal: XJobsError | None = None,
    steps: StepStore | None = None,
    events: EventBus | None = None,
    holds: Holds | None = None,
    threads: BodyThreads | None = None,
) -> Execution:
    """Run one claimed job to its settle; a refusal (the run's own or `refusal`) fails the attempt
    without running the body. Never raises for the job's own failure; `holds` says whether the
    lease is still held, so a settle the store could not take is retried meanwhile."""
    handle = run.handle
    assert handle is not None, "a run of an unknown job is settled by Settler.unknown"
    job = run.job
    claim = run.claim
    progress = ProgressThrottle(clock, lambda v: settler.record_progress(claim, v))
    error: BaseException | None = refusal or run.refusal
    returned: object = None
    if error is None and handle.sync:
        sync_ctx = SyncJobContext(
            **_identity(run),
            _progress=progress,
            _signal=signal,
            _loop=asyncio.get_running_loop(),
        )
        error, returned = await _run_body(
            handle, sync_ctx, run.value, signal, threads or BodyThreads(1)
        )
    elif error is None:
        step = StepApi(
            StepRun(claim, job.run_id, job.queue, handle.step_timeout_ms),
            store=steps,
            events=events,
            clock=clock,
            signal=signal,
            observer=settler.observer,
        )
        ctx = JobContext(**_identity(run), step=step, _progress=progress, _signal=signal)
        error, returned = await _run_body(handle, ctx, run.value, signal, threads or BodyThreads(1))
    if not isinstance(error, LeaseLostError | JobCancelledError):
        await flush_quietly(progress.flush, job)
    return await settler.settle(run, error, holds=holds, returned=returned)
