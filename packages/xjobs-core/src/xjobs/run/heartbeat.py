"""One run's lease, held not owned: renewed on a timer; a miss or a whole window without a landing aborts the run."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from xjobs.contract.driver import Claim, JobDriver
from xjobs.errors import JobCancelledError, LeaseLostError, SlotLostError, XJobsError
from xjobs.run.signal import RunSignal

log = logging.getLogger("xjobs.run.heartbeat")

RenewFn = Callable[[], Awaitable[bool]]


class Renewal:
    """One renewed thing (the job lease or a fleet slot): when it last landed and what losing it means."""

    __slots__ = ("last_landed", "loss", "renew", "what")

    def __init__(self, what: str, renew: RenewFn, loss: Callable[[], XJobsError]) -> None:
        self.what = what
        self.renew = renew
        self.loss = loss
        self.last_landed = time.monotonic()


class _Beats:
    """Every lease keeper of one event loop that beats every `every_s`, behind one timer.

    All of them wait the same interval, so the order they were armed in is the order they fall
    due: an ordered dict is the whole schedule (arm, disarm and the next due are O(1)), and a
    claim or a settle costs no timer of its own.
    """

    __slots__ = ("_due", "_every_s", "_timer")

    def __init__(self, every_s: float) -> None:
        # no reference to the loop: it is the key this schedule is kept under, weakly
        self._every_s = every_s
        self._due: OrderedDict[LeaseKeeper, float] = OrderedDict()
        self._timer: asyncio.TimerHandle | None = None

    def arm(self, keeper: LeaseKeeper) -> None:
        """`keeper` beats one interval from now (after every keeper armed before it)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + self._every_s
        self._due[keeper] = at
        self._due.move_to_end(keeper)
        if self._timer is None:
            self._timer = loop.call_at(at, self._fire)

    def disarm(self, keeper: LeaseKeeper) -> None:
        """`keeper` no longer beats (a timer armed for it finds nothing due and re-arms)."""
        self._due.pop(keeper, None)

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._due:
            keeper, at = next(iter(self._due.items()))
            if at > now:
                self._timer = loop.call_at(at, self._fire)
                return
            del self._due[keeper]
            keeper.fire()


_schedules: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Beats]] = (
    weakref.WeakKeyDictionary()
)


def _beats(every_s: float) -> _Beats:
    """The running loop's schedule of keepers beating every `every_s`."""
    loop = asyncio.get_running_loop()
    by_interval = _schedules.get(loop)
    if by_interval is None:
        by_interval = _schedules[loop] = {}
    beats = by_interval.get(every_s)
    if beats is None:
        beats = by_interval[every_s] = _Beats(every_s)
    return beats


class LeaseKeeper:
    """Renews a run's job lease (and its fleet slots) every `every_ms`, until stopped or aborted."""

    __slots__ = (
        "_beats",
        "_driver",
        "_every_s",
        "_lease_ms",
        "_renewals",
        "_signal",
        "_stopped",
        "_task",
        "_window_s",
        "claim",
    )

    def __init__(
        self, driver: JobDriver, claim: Claim, *, lease_ms: int, every_ms: int, signal: RunSignal
    ) -> None:
        self._driver = driver
        self.claim = claim
        self._lease_ms = lease_ms
        self._every_s = every_ms / 1000
        self._window_s = lease_ms / 1000
        self._signal = signal
        self._stopped = False
        self._beats: _Beats | None = None
        self._task: asyncio.Task[None] | None = None
        self._renewals = [
            Renewal("job lease", lambda: driver.heartbeat(claim, lease_ms), self._job_loss)
        ]

    def hold(self, what: str, renew: RenewFn) -> None:
        """Also renew `what` (a fleet slot) on each beat; a whole window without a landing is `XJOBS_SLOT_LOST`."""
        self._renewals.append(
            Renewal(
                what, renew, lambda: SlotLostError(f"{what} could not be renewed for a whole TTL")
            )
        )

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
            not self._signal.aborted and time.monotonic() - job_lease.last_landed < self._window_s
        )

    def start(self) -> None:
        """Arm the first beat, one interval after the claim."""
        self._beats = _beats(self._every_s)
        self._arm()

    def _arm(self) -> None:
        if self.stopped() or self._beats is None:
            return
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
            held = await self._answered_in_window(renewal)
        except Exception as exc:
            if self.stopped():
                return
            if time.monotonic() - renewal.last_landed >= self._window_s:
                log.warning(
                    "jobs.lease.lost", extra={"job_id": self.claim.job_id, "what": renewal.what}
                )
                self._signal.abort(renewal.loss())
            else:
                log.warning(
                    "jobs.heartbeat.missed",
                    extra={"job_id": self.claim.job_id, "what": renewal.what, "error": repr(exc)},
                )
            return
        if self.stopped():
            return
        if held:
            renewal.last_landed = time.monotonic()
        elif renewal is self._renewals[0]:
            await self._job_fence_missed()
        else:
            self._signal.abort(renewal.loss())

    async def _answered_in_window(self, renewal: Renewal) -> bool:
        """The renewal's answer, or `TimeoutError` once its window closes without one.

        A pooler (pgbouncer) holds a statement for as long as its server is down, and a cancelled
        statement returns only when the server answers: the renewal is not awaited past the window.
        """
        left_s = self._window_s - (time.monotonic() - renewal.last_landed)
        renewing = asyncio.ensure_future(renewal.renew())
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
            record = await self._driver.get(self.claim.job_id)
        except Exception:
            record = None
        if record is not None and record.state == "cancelled":
            self._signal.abort(JobCancelledError(f"job {self.claim.job_id} was cancelled"))
        else:
            log.warning("jobs.lease.lost", extra={"job_id": self.claim.job_id})
            self._signal.abort(self._job_loss())

    def stop(self) -> None:
        """Stop renewing (the run settled); a beat in flight is cancelled."""
        self._stopped = True
        if self._beats is not None:
            self._beats.disarm(self)
        if self._task is not None:
            self._task.cancel()
            self._task = None


def _retrieved(task: asyncio.Future[bool]) -> None:
    """Read a renewal's outcome, so one left behind never logs 'exception was never retrieved'."""
    if not task.cancelled():
        task.exception()
