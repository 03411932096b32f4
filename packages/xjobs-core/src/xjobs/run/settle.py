"""The settle room: every way a run ends is decided, stored, logged and announced here, once.

A driver stores the `Nack` it is handed and never re-derives it; the retry rule, the final-attempt
rule and the `jobs.settle.unowned` line exist only in this module.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from xjobs.clock import Clock
from xjobs.codec import encode_result
from xjobs.contract.driver import (
    LAPSED_ON_FINAL_ATTEMPT,
    WAIT_FOREVER_MS,
    BuriedJob,
    Claim,
    ClaimedJob,
    JobDriver,
    Nack,
    Outcome,
)
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.results import ResultStore
from xjobs.contract.stores import EventBus
from xjobs.declare.job import DEFAULT_MAX_RESULT_BYTES, JobHandle
from xjobs.declare.retry import is_terminal_error, requested_delay_ms
from xjobs.errors import (
    DrainingError,
    JobCancelledError,
    JobNotRegisteredError,
    LeaseLostError,
    RateLimitedError,
    ResultInvalidError,
    SlotLostError,
    StepInvalidError,
)
from xjobs.run.children import ChildSuspension
from xjobs.run.record import RunRecord
from xjobs.run.settled import Settled, SettledHook, announce_settled
from xjobs.run.steps import StepSuspension

log = logging.getLogger("xjobs.run.settle")

Holds = Callable[[], bool]

MAX_ERROR_CHARS = 4000
# A settle the store could not take is retried while the lease holds: floor, doubling, ceiling.
SETTLE_RETRY_FLOOR_S = 0.05
SETTLE_RETRY_CEILING_S = 2.0
# A shed (busy key) or an unknown job name is due again after this long.
SHED_DELAY_MS = 1000


@dataclass(frozen=True, slots=True)
class Execution:
    """How one run ended: its outcome, whether the settle landed, and when a retry is due."""

    outcome: Outcome
    landed: bool
    error: str | None = None
    resume_at_ms: int | None = None


# How every completed run ends: one shared record.
COMPLETED: Final = Execution("completed", landed=True)


def describe_error(error: BaseException) -> str:
    """The `last_error` text: the error's type and message first, then its traceback, bounded."""
    head = f"{type(error).__name__}: {error}"
    if error.__traceback__ is None:
        return head[:MAX_ERROR_CHARS]
    frames = "".join(traceback.format_tb(error.__traceback__))
    return f"{head}\n{frames}".rstrip()[:MAX_ERROR_CHARS]


# -- the nacks: each way a run that did not complete settles -------------------------------------


def retrying(error: str | None, run_at_ms: int | None = None) -> Nack:
    """A counted failure with attempts left: back to `ready` at `run_at_ms` (`None`: now)."""
    return Nack("ready", "retried", run_at_ms, error)


def ending(dead_letter: bool, error: str | None) -> Nack:
    """A failure for good: `dead` (kept for an operator) or, with `dead_letter=False`, `failed`."""
    if dead_letter:
        return Nack("dead", "dead-lettered", error=error)
    return Nack("failed", "dropped", error=error)


def parking(run_at_ms: int) -> Nack:
    """A suspension: `waiting` until `run_at_ms` (or an event), uncounted, no error."""
    return Nack("waiting", "suspended", run_at_ms, counts_as_attempt=False)


def shedding(run_at_ms: int) -> Nack:
    """A busy key with `when_busy="wait"`: back to `ready`, uncounted, no `last_error`."""
    return Nack("ready", "shed", run_at_ms, counts_as_attempt=False)


def deferring(run_at_ms: int) -> Nack:
    """Over a rate: back to `ready` at the time a permit is free, uncounted, no error."""
    return Nack("ready", "deferred", run_at_ms, counts_as_attempt=False)


def handing_back(run_at_ms: int) -> Nack:
    """A claim that never started (the drain raced it, admission failed): back, uncounted."""
    return Nack("ready", "handed-back", run_at_ms, counts_as_attempt=False)


def interrupting(error: str, run_at_ms: int) -> Nack:
    """The drain cut a running job short: retried now, uncounted."""
    return Nack("ready", "interrupted", run_at_ms, error, counts_as_attempt=False)


def refusing(error: str) -> Nack:
    """A busy key with `when_busy="fail"` and evidence of another holder: `failed`, uncounted."""
    return Nack("failed", "refused", error=error, counts_as_attempt=False)


def deciding(
    job: ClaimedJob, handle: JobHandle[Any] | None, error: BaseException, now_ms: int
) -> Nack:
    """The retry decision, read from the error: the settle itself sits outside it."""
    text = describe_error(error)
    if isinstance(error, DrainingError):
        return interrupting(text, now_ms)
    if isinstance(error, SlotLostError):
        return Nack("ready", "retried", now_ms, text, counts_as_attempt=False)
    if is_terminal_error(error) or job.attempt >= job.max_attempts:
        return ending(job.dead_letter, text)
    delay_ms = SHED_DELAY_MS if handle is None else handle.retry.delay_ms(job.attempt)
    return retrying(text, now_ms + max(delay_ms, requested_delay_ms(error)))


# -- the room ---------------------------------------------------------------------------------------


class Settler:
    """Stores a run's ending through the driver, logs a missed fence once, and announces the ending."""

    def __init__(
        self,
        driver: JobDriver,
        clock: Clock,
        *,
        hooks: tuple[SettledHook, ...] = (),
        ack: Callable[[Claim], Awaitable[bool]] | None = None,
        events: EventBus | None = None,
        results: ResultStore | None = None,
        observer: Observer = NOOP,
    ) -> None:
        self._results = results
        self.observer = observer
        self._driver = driver
        self._clock = clock
        self._hooks = hooks
        self._ack = ack or driver.ack
        self._events = events

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        """Store a run's progress, fenced like every settle."""
        return await self._driver.record_progress(claim, progress)

    def hooks_for(self, handle: JobHandle[Any] | None) -> tuple[SettledHook, ...]:
        """The app's hooks, then the job's own `on_settled`."""
        if handle is not None and handle.on_settled is not None:
            return (*self._hooks, handle.on_settled)
        return self._hooks

    async def settle(
        self,
        run: RunRecord,
        error: BaseException | None,
        *,
        holds: Holds | None = None,
        returned: object = None,
    ) -> Execution:
        """End a run the body (or its refusal) ended: completed, parked, lost, or the retry decision.

        A store that fails to answer is asked again, with backoff, while `holds()` says the lease is
        still held (the heartbeat keeps it); the fence makes a repeated settle safe.
        """
        if error is None:
            if returned is None or self._results is None:  # nothing to store with it
                return await self._land(run, None, holds=holds)
            try:
                result = self._encode(run, returned)
            except ResultInvalidError as refused:
                error = refused
            else:
                return await self._land(run, None, holds=holds, result=result)
        if isinstance(error, StepSuspension):
            return await self.park(run, error, holds=holds)
        if isinstance(error, LeaseLostError | JobCancelledError):
            # The claim moved on (or an operator cancelled): this run writes nothing more.
            outcome: Outcome = "cancelled" if isinstance(error, JobCancelledError) else "lease-lost"
            text = describe_error(error)
            if self.observer.enabled:
                if outcome == "cancelled":
                    self.observer.settled(run.job, outcome, text)
                else:
                    self.observer.lease_lost(run.job)
            return Execution(outcome, landed=False, error=text)
        nack = deciding(run.job, run.handle, error, self._clock.now_ms())
        return await self._land(run, nack, holds=holds)

    def _encode(self, run: RunRecord, returned: object) -> str | None:
        """What the body returned, as the JSON stored with its completion (`None` stores nothing)."""
        if returned is None or self._results is None:
            return None
        limit = DEFAULT_MAX_RESULT_BYTES if run.handle is None else run.handle.result_max_bytes
        try:
            text = encode_result(returned, step="result", max_bytes=limit)
        except StepInvalidError as exc:
            raise ResultInvalidError(
                f"job {run.job.name!r} returned a value that cannot be stored: {exc.message}"
            ) from exc
        return text

    async def park(
        self, run: RunRecord, suspension: StepSuspension, *, holds: Holds | None = None
    ) -> Execution:
        """A suspension parks the job until its wake time, its event (the bus parks a wait), or its
        children (the child store parks it, due at once when they resolved before the park)."""
        run_at = suspension.resume_at_ms
        wait = suspension.wait
        poll_ms = None if run.handle is None else run.handle.event_poll_ms
        if wait is not None and poll_ms is not None:
            run_at = min(run_at, self._clock.now_ms() + poll_ms)
        if isinstance(suspension, ChildSuspension):
            park, nack = suspension.park, parking(run_at)
            landed = await _stored(lambda: park(run.claim, nack), run.job, holds)
            if not landed:
                return self._unowned(run.job, "suspended")
        elif wait is not None and self._events is not None:
            events, nack = self._events, parking(run_at)
            landed = await _stored(lambda: events.park(run.claim, wait, nack), run.job, holds)
            if not landed:
                return self._unowned(run.job, "suspended")
        else:
            execution = await self._land(run, parking(run_at), holds=holds)
            if not execution.landed:
                return execution
        log.info(
            "jobs.run.suspended",
            extra={"job_id": run.job.id, "job": run.job.name, "step": suspension.step},
        )
        stored_here = isinstance(suspension, ChildSuspension) or (
            wait is not None and self._events is not None
        )
        if stored_here and self.observer.enabled:  # `_land` announces the plain park itself
            self.observer.settled(run.job, "suspended", None)
        resume_at = None if run_at >= WAIT_FOREVER_MS else run_at
        return Execution("suspended", landed=True, resume_at_ms=resume_at)

    async def shed(self, run: RunRecord, *, holds: Holds | None = None) -> Execution:
        """A busy key with `when_busy="wait"`: due again after `SHED_DELAY_MS`."""
        nack = shedding(self._clock.now_ms() + SHED_DELAY_MS)
        execution = await self._land_unstarted(run, nack, holds)
        if execution.landed:
            log.info("jobs.worker.shed", extra={"job_id": run.job.id, "job": run.job.name})
        return execution

    async def defer(self, run: RunRecord, wait_ms: int, *, holds: Holds | None = None) -> Execution:
        """Over a rate (`XJOBS_RATE_LIMITED`): due again in `wait_ms`, when a permit is free."""
        nack = deferring(self._clock.now_ms() + wait_ms)
        execution = await self._land_unstarted(run, nack, holds)
        if execution.landed:
            log.info(
                "jobs.worker.rate-limited",
                extra={
                    "code": RateLimitedError.code,
                    "job_id": run.job.id,
                    "job": run.job.name,
                    "wait_ms": wait_ms,
                },
            )
        return execution

    async def refuse(self, run: RunRecord, reason: str, *, holds: Holds | None = None) -> Execution:
        """A refusal by a busy key: failed, uncounted, announced; the body never ran."""
        return await self._land_unstarted(run, refusing(f"refused: {reason}"), holds)

    async def unknown(self, run: RunRecord) -> Execution:
        """A row names a job this worker does not know: a counted failure, so it surfaces as dead."""
        error = JobNotRegisteredError(f"no job named {run.job.name!r} is registered in this worker")
        nack = deciding(run.job, None, error, self._clock.now_ms())
        return await self._land(run, nack, announce=False)

    async def _land_unstarted(self, run: RunRecord, nack: Nack, holds: Holds | None) -> Execution:
        """Store the settle of a run that never started (a shed, a deferral, a refusal); one the
        store could not take while the lease held is handed back uncounted, as a failed admission
        is, and asked again until the store answers: left `running`, the row's lease would lapse
        and its reclaim would charge an attempt (or bury the job on its final one)."""
        try:
            return await self._land(run, nack, holds=holds)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning(
                "jobs.worker.admission-unsettled",
                extra={"job_id": run.job.id, "job": run.job.name, "outcome": nack.outcome},
                exc_info=True,
            )
        return await self.hand_back_unstarted(run.job)

    async def hand_back_unstarted(self, job: ClaimedJob) -> Execution:
        """Give back a claim that never started and could not be settled, uncounted, asked again
        until the store answers: it lands while the claim is still this run's."""
        if await self.hand_back(job, holds=_until_answered):
            return Execution("handed-back", landed=True)
        return Execution("lease-lost", landed=False)

    async def hand_back(self, job: ClaimedJob, *, holds: Holds | None = None) -> bool:
        """Give back a claim that never started, uncounted; answers whether it landed."""
        nack = handing_back(self._clock.now_ms())
        landed = await _stored(lambda: self._driver.nack(job.claim, nack), job, holds)
        if not landed:
            self._unowned(job, "handed-back")
        return landed

    async def buried(self, buried: BuriedJob, handle: JobHandle[Any] | None) -> None:
        """The claim buried a lapsed lease on its final attempt: announce it as the ending it is."""
        outcome: Outcome = "dead-lettered" if buried.state == "dead" else "dropped"
        if self.observer.enabled:
            self.observer.buried(buried.queue, buried.name)
        log.warning(
            "jobs.claim.buried",
            extra={
                "job_id": buried.id,
                "job": buried.name,
                "queue": buried.queue,
                "attempt": buried.attempt,
                "outcome": outcome,
            },
        )
        tenant = RunRecord.tenant_of(handle, buried.payload)
        event = Settled(
            buried.id,
            buried.run_id,
            buried.name,
            buried.queue,
            outcome,
            buried.attempt,
            tenant,
            LAPSED_ON_FINAL_ATTEMPT,
        )
        await announce_settled(self.hooks_for(handle), event)

    async def _land(
        self,
        run: RunRecord,
        nack: Nack | None,
        *,
        announce: bool = True,
        holds: Holds | None = None,
        result: str | None = None,
    ) -> Execution:
        """Store the ending (`None`: completed, with its `result` when the body returned one); a
        missed fence is logged once and announces nothing."""
        job, claim = run.job, run.claim
        outcome: Outcome = "completed" if nack is None else nack.outcome
        write: Callable[[], Awaitable[bool]]
        if nack is None and result is not None and self._results is not None:
            write = functools.partial(self._results.complete, claim, result)
        elif nack is None:
            write = functools.partial(self._ack, claim)
        else:
            write = functools.partial(self._driver.nack, claim, nack)
        try:  # the first try inline: a store that answers costs no retry loop
            landed = await write()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            landed = await _retried(write, job, holds, exc)
        if not landed:
            return self._unowned(job, outcome, nack.error if nack is not None else None)
        error = None if nack is None else nack.error
        if self.observer.enabled:
            self.observer.settled(job, outcome, error)
        hooks = self.hooks_for(run.handle) if announce else ()
        if hooks:  # nothing to tell: no event is built
            attempt = job.attempt if nack is None or nack.counts_as_attempt else job.attempt - 1
            event = Settled(
                job.id, job.run_id, job.name, job.queue, outcome, attempt, run.tenant, error
            )
            await announce_settled(hooks, event)
        if nack is None:
            return COMPLETED  # immutable: every completion shares it
        resume_at = None
        if nack.state == "ready" and outcome != "handed-back":
            resume_at = nack.run_at_ms
        return Execution(outcome, landed=True, error=error, resume_at_ms=resume_at)

    def _unowned(self, job: ClaimedJob, outcome: Outcome, error: str | None = None) -> Execution:
        if self.observer.enabled:
            self.observer.lease_lost(job)
        log.warning(
            "jobs.settle.unowned",
            extra={
                "job_id": job.id,
                "job": job.name,
                "queue": job.queue,
                "attempt": job.attempt,
                "outcome": outcome,
            },
        )
        return Execution("lease-lost", landed=False, error=error)


def _until_answered() -> bool:
    """A write retried until the store answers: the fence keeps a late one harmless (it lands
    while the claim is still this run's, and misses once another claim took the row)."""
    return True


async def _stored(
    write: Callable[[], Awaitable[bool]], job: ClaimedJob, holds: Holds | None
) -> bool:
    """One fenced write; an error is retried with backoff while the lease holds, then raised."""
    try:
        return await write()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return await _retried(write, job, holds, exc)


async def _retried(
    write: Callable[[], Awaitable[bool]], job: ClaimedJob, holds: Holds | None, failed: Exception
) -> bool:
    """A fenced write whose first try raised `failed`: retried with backoff while the lease
    holds, else that error is raised."""
    delay_s = SETTLE_RETRY_FLOOR_S
    exc: Exception = failed
    while True:
        if holds is None or not holds():
            raise exc
        log.warning(
            "jobs.settle.retrying",
            extra={"job_id": job.id, "job": job.name, "error": repr(exc), "delay_s": delay_s},
        )
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, SETTLE_RETRY_CEILING_S)
        try:
            return await write()
        except asyncio.CancelledError:
            raise
        except Exception as again:
            exc = again


async def flush_quietly(flush: Callable[[], Awaitable[None]], job: ClaimedJob) -> None:
    """Flush the progress throttle before a settle; a failed flush never stops the settle."""
    try:
        await flush()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.warning("jobs.progress.flush-failed", extra={"job_id": job.id}, exc_info=True)
