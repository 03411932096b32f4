"""`execute_job`: the one execution path — the run's context, the body under its signal, then the settle room."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from xjobs.actor import Actor, reset_actor, set_actor
from xjobs.declare.job import JobHandle
from xjobs.errors import JobCancelledError, LeaseLostError, TimeoutExceededError, XJobsError
from xjobs.run.context import JobContext, RunTools, SyncJobContext, progress_of
from xjobs.run.record import RunRecord
from xjobs.run.settle import Execution, Holds, Settler, flush_quietly
from xjobs.run.signal import RunSignal
from xjobs.run.threads import BodyThreads

T = TypeVar("T")

# The actor of a run with no tenant: the same for every such run.
_NO_ORG = Actor()


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
    (`None` on success) and what it returned.

    The body runs in a task of its own (the signal cancels it, never the run), started eagerly
    where the loop can (Python 3.12): a body that finishes without waiting costs no loop turn.
    """
    if signal.aborted:  # aborted before it started: the body never runs
        return signal.reason, None
    deadline = _arm_deadline(handle, signal)
    try:
        body = _start_body(handle, ctx, value, threads)
        signal.attach(body)
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


def _start_body(
    handle: JobHandle[Any], ctx: JobContext | SyncJobContext, value: Any, threads: BodyThreads
) -> asyncio.Task[object]:
    """The body's task, made with the run's actor (org only) installed: the task's context is a
    copy of this one, so the actor is the body's alone."""
    tenant = ctx.tenant
    token = set_actor(_NO_ORG if tenant is None else Actor(org_id=tenant))
    try:
        if handle.sync:
            coro = threads.run(handle.fn, ctx, value)
        else:
            coro = _awaited(handle.fn(ctx, value))
        return start_eagerly(coro)
    finally:
        reset_actor(token)


if sys.version_info >= (3, 12):

    def start_eagerly(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task for `coro`, its first step run now (Python 3.12's eager start): a coroutine that
        finishes without waiting is done on return and never takes a turn of the loop."""
        return asyncio.Task(coro, loop=asyncio.get_running_loop(), eager_start=True)

else:

    def start_eagerly(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task for `coro` (before Python 3.12 every task starts on the loop's next turn)."""
        return asyncio.get_running_loop().create_task(coro)


def _awaited(answer: Any) -> Coroutine[Any, Any, object]:
    """An async body's answer as a coroutine (what a task runs); an awaitable that is not one is
    awaited inside one."""
    if asyncio.iscoroutine(answer):
        return answer

    async def wait() -> object:
        return await answer

    return wait()


def _cancelling() -> int:
    """How many cancellations of the running task are pending (the run's, not its body's)."""
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


async def execute_job(
    run: RunRecord,
    *,
    settler: Settler,
    tools: RunTools,
    signal: RunSignal,
    refusal: XJobsError | None = None,
    holds: Holds | None = None,
    threads: BodyThreads | None = None,
) -> Execution:
    """Run one claimed job to its settle; a refusal (the run's own or `refusal`) fails the attempt
    without running the body. Never raises for the job's own failure; `holds` says whether the
    lease is still held, so a settle the store could not take is retried meanwhile."""
    handle = run.handle
    assert handle is not None, "a run of an unknown job is settled by Settler.unknown"
    error: BaseException | None = refusal or run.refusal
    returned: object = None
    if error is None:
        ctx = SyncJobContext(run, signal, tools) if handle.sync else JobContext(run, signal, tools)
        error, returned = await _run_body(handle, ctx, run.value, signal, threads or BodyThreads(1))
        progress = progress_of(ctx)
        if progress is not None and not isinstance(error, LeaseLostError | JobCancelledError):
            await flush_quietly(progress.flush, run.job)
    return await settler.settle(run, error, holds=holds, returned=returned)
