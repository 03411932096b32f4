"""One run's lease, held not owned: renewed on a timer; a miss or a whole window without a landing aborts the run.

A renewal answers a boolean: `True` held, `False` lost (the fence missed). Any other answer is the
driver's error, counted as a failed renewal (as a raise is), never as a missed fence.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from xjobs.contract.driver import Claim, JobDriver
from xjobs.errors import (
    BackendError,
    JobCancelledError,
    LeaseLostError,
    SlotLostError,
    XJobsError,
)
from xjobs.run.signal import RunSignal

log = logging.getLogger("xjobs.run.heartbeat")

RenewFn = Callable[[], Awaitable[bool]]


class Renewal:
    """One renewed thing (the job lease or a fleet slot): when it last landed and what losing it means.

    The job lease's own renewal has no `renew` and no `loss`: the keeper heartbeats the claim and
    builds its loss itself (no closure per run).
    """

    __slots__ = ("last_landed", "loss", "renew", "what")

    def __init__(
        self,
        what: str,
        renew: RenewFn | None = None,
        loss: Callable[[], XJobsError] | None = None,
    ) -> None:
        self.what = what
        self.renew = renew
        self.loss = loss
        self.last_landed = time.monotonic()


class BeatSchedule:
    """Every lease keeper of one worker, behind one timer: they all beat every `every_ms`, each
    renewing its job's lease through `driver` for `lease_ms`.

    All of them wait the same interval, so the order they were armed in is the order they fall
    due: an insertion-ordered dict is the whole schedule (arm, disarm and the next due are O(1)),
    and a claim or a settle costs no timer of its own. The timer is the running loop's.
    """

    __slots__ = ("_due", "_every_s", "_timer", "driver", "lease_ms", "window_s")

    def __init__(self, driver: JobDriver, *, lease_ms: int, every_ms: int) -> None:
        self.driver = driver
        self.lease_ms = lease_ms
        self.window_s = lease_ms / 1000
        self._every_s = every_ms / 1000
        self._due: dict[LeaseKeeper, float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def arm(self, keeper: LeaseKeeper) -> None:
        """`keeper` beats one interval from now (after every keeper armed before it)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + self._every_s
        due = self._due
        due.pop(keeper, None)  # re-armed: to the end, where its new time belongs
        due[keeper] = at
        if self._timer is None:
            self._timer = loop.call_at(at, self._fire)

    def disarm(self, keeper: LeaseKeeper) -> None:
        """`keeper` no longer beats (a timer armed for it finds nothing due and re-arms)."""
        self._due.pop(keeper, None)

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = self._due
        while due:
            keeper, at = next(iter(due.items()))
            if at > now:
                self._timer = loop.call_at(at, self._fire)
                return
            del due[keeper]
            keeper.fire()


class LeaseKeeper:
    """Renews a run's job lease (and its fleet slots) every `every_ms`, until stopped or aborted."""

    __slots__ = (
        "_beats",
        "_renewals",
        "_signal",
        "_started",
        "_stopped",
        "_task",
        "claim",
    )

    def __init__(self, claim: Claim, signal: RunSignal, beats: BeatSchedule) -> None:
        self.claim = claim
        self._signal = signal
        self._stopped = False
        self._started = False
        self._beats = beats
        self._task: asyncio.Task[None] | None = None
        self._renewals = [Renewal("job lease")]

    def hold(self, what: str, renew: RenewFn) -> None:
        """Also renew `what` (a fleet slot) on each beat; a whole window without a landing is `XJOBS_SLOT_LOST`."""
        self._renewals.append(
            Renewal(
                what, renew, lambda: SlotLostError(f"{what} could not be renewed for a whole TTL")
            )
        )

    def _loss(self, renewal: Renewal) -> XJobsError:
        return self._job_loss() if renewal.loss is None else renewal.loss()

    def _job_loss(self) -> XJobsError:
        return LeaseLostError(
            f"job {self.claim.job_id}: no heartbeat landed for a whole lease window"
        )

    def stopped(self) -> bool:
        """Whether renewing is over: stopped by the run or aborted by its signal."""
        return self._stopped or self._signal.aborted

    def holds(self) -> bool:
        """Whether the job lease is still held: not aborted, and a renewal landed within a lease window.

        Before the first beat the claim itself is the last landing.
        """
        job_lease = self._renewals[0]
        return (
            not self._signal.aborted
            and time.monotonic() - job_lease.last_landed < self._beats.window_s
        )

    def start(self) -> None:
        """Arm the first beat, one interval after the claim."""
        self._started = True
        if not self._stopped and not self._signal.aborted:
            self._beats.arm(self)

    def _arm(self) -> None:
        if self._started and not self.stopped():
            self._beats.arm(self)

    def fire(self) -> None:
        """A beat is due (the schedule calls this): renew, in a task of its own."""
        if self.stopped():
            return
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        try:
            for renewal in self._renewals:
                await self._renew(renewal)
                if self.stopped():
                    return
        except Exception:  # every timer body catches before it finalises
            log.exception("jobs.heartbeat.failed", extra={"job_id": self.claim.job_id})
        finally:
            self._task = None
            self._arm()

    async def _renew(self, renewal: Renewal) -> None:
        try:
            held = _read_answer(renewal, await self._answered_in_window(renewal))
        except Exception as exc:
            if self.stopped():
                return
            if time.monotonic() - renewal.last_landed >= self._beats.window_s:
                log.warning(
                    "jobs.lease.lost", extra={"job_id": self.claim.job_id, "what": renewal.what}
                )
                self._signal.abort(self._loss(renewal))
            else:
                log.warning(
                    "jobs.heartbeat.missed",
                    extra={"job_id": self.claim.job_id, "what": renewal.what, "error": repr(exc)},
                )
            return
        if self.stopped():
            return
        if held is True:
            renewal.last_landed = time.monotonic()
        elif renewal is self._renewals[0]:
            await self._job_fence_missed()
        else:
            self._signal.abort(self._loss(renewal))

    async def _answered_in_window(self, renewal: Renewal) -> object:
        """The renewal's answer, or `TimeoutError` once its window closes without one.

        A pooler (pgbouncer) holds a statement for as long as its server is down, and a cancelled
        statement returns only when the server answers: the renewal is not awaited past the window.
        """
        beats = self._beats
        left_s = beats.window_s - (time.monotonic() - renewal.last_landed)
        renew = renewal.renew
        answer = beats.driver.heartbeat(self.claim, beats.lease_ms) if renew is None else renew()
        renewing = asyncio.ensure_future(answer)
        renewing.add_done_callback(_retrieved)
        try:
            done, _ = await asyncio.wait({renewing}, timeout=max(left_s, 0.001))
        finally:
            if not renewing.done():
                renewing.cancel()  # it ends when the engine answers; nothing waits for that
        if not done:
            raise TimeoutError(f"{renewal.what}: no answer within the window")
        return renewing.result()

    async def _job_fence_missed(self) -> None:
        """The fence missed: an operator cancelled the job, or another claim took it."""
        try:
            record = await self._beats.driver.get(self.claim.job_id)
        except Exception:
            record = None
        if self.stopped():
            return  # settled or aborted for another reason while the lookup ran
        if record is not None and record.state == "cancelled":
            self._signal.abort(JobCancelledError(f"job {self.claim.job_id} was cancelled"))
        else:
            log.warning("jobs.lease.lost", extra={"job_id": self.claim.job_id})
            self._signal.abort(self._job_loss())

    def stop(self) -> None:
        """Stop renewing (the run settled); a beat in flight is cancelled."""
        self._stopped = True
        if self._started:
            self._beats.disarm(self)
        if self._task is not None:
            self._task.cancel()
            self._task = None


def _read_answer(renewal: Renewal, answer: object) -> bool:
    """A renewal's answer as the contract's boolean; anything else is the driver's error."""
    if isinstance(answer, bool):
        return answer
    raise BackendError(f"{renewal.what}: the renewal answered {answer!r}, not a boolean")


def _retrieved(task: asyncio.Future[bool]) -> None:
    """Read a renewal's outcome, so one left behind never logs 'exception was never retrieved'."""
    if not task.cancelled():
        task.exception()
