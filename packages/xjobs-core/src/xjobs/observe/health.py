"""Liveness and readiness: is each role's loop coming back when it said it would, and does the backend answer.

A loop beats after every pass with how long it will wait before the next one; it is alive while
it is not overdue by more than `grace_s` (a blocked event loop or a hung pass stops the beats).
A role that drains (SIGTERM) stops beating on purpose: it is alive until its drain's deadline
(plus the grace) and, meanwhile, not ready. `/readyz` answers a coded reason, never an
exception's text (it may name a host, a user or a URL); the detail goes to the log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from xjobs.errors import XJobsError

log = logging.getLogger("xjobs.observe.health")

DEFAULT_GRACE_S: Final = 30.0
READY_TIMEOUT_S: Final = 5.0
# The reasons `/readyz` answers besides an `XJobsError`'s own code.
LOOP_CLOSED: Final = "loop-closed"
PROBE_TIMEOUT: Final = "probe-timeout"
PROBE_FAILED: Final = "probe-failed"
# An id no job ever has: reading it is one cheap keyed read on every backend.
PROBE_JOB_ID: Final = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True, slots=True)
class Verdict:
    """A probe's answer: healthy or not, and what it saw (the response body)."""

    ok: bool
    detail: dict[str, Any]


class Liveness:
    """The last beat of each role's loop in this process, and when it is due back."""

    def __init__(self, grace_s: float = DEFAULT_GRACE_S) -> None:
        self.grace_s = grace_s
        self._due: dict[str, float] = {}
        self._draining: dict[str, float] = {}
        self._lock = threading.Lock()

    def beat(self, role: str, next_within_s: float) -> None:
        """`role`'s loop passed and will be back within `next_within_s`."""
        due = time.monotonic() + max(next_within_s, 0.0)
        with self._lock:
            self._due[role] = due

    def drain(self, role: str, within_s: float) -> None:
        """`role` stopped taking work and drains for at most `within_s`: its loop beats no more."""
        ends = time.monotonic() + max(within_s, 0.0)
        with self._lock:
            self._draining[role] = ends
            self._due[role] = ends

    def draining(self) -> list[str]:
        """The roles of this process that are draining."""
        with self._lock:
            return sorted(self._draining)

    def verdict(self) -> Verdict:
        """Alive unless a loop is overdue by more than the grace (a loop not yet started is alive;
        a draining one is due back at its drain's deadline)."""
        now = time.monotonic()
        with self._lock:
            due = dict(self._due)
            draining = set(self._draining)
        overdue = {role: round(now - at, 3) for role, at in due.items() if now - at > self.grace_s}
        loops = {
            role: "overdue" if role in overdue else "draining" if role in draining else "ok"
            for role in due
        }
        return Verdict(
            not overdue,
            {"status": "unhealthy" if overdue else "ok", "loops": loops, "overdue_s": overdue},
        )


Probe = Callable[[], Awaitable[object]]


def backend_probe(read: Callable[[str], Awaitable[object]]) -> Probe:
    """A readiness probe that reads one job by an id no job has (`backend.jobs.get`)."""

    async def probe() -> object:
        return await read(PROBE_JOB_ID)

    return probe


def readiness(
    probe: Probe,
    loop: asyncio.AbstractEventLoop,
    timeout_s: float = READY_TIMEOUT_S,
    liveness: Liveness | None = None,
) -> Verdict:
    """Run `probe` on the role's loop from another thread: ready when it answers within `timeout_s`.

    A process with a draining role is not ready, whatever the backend says (it takes no more work).
    """
    draining = liveness.draining() if liveness is not None else []
    if draining:
        return Verdict(False, {"status": "draining", "draining": draining})
    if loop.is_closed():
        return Verdict(False, {"status": "unready", "reason": LOOP_CLOSED})
    future = asyncio.run_coroutine_threadsafe(_call(probe), loop)
    try:
        future.result(timeout=timeout_s)
    except Exception as exc:
        future.cancel()
        reason = _reason(exc)
        log.warning("jobs.readyz.unready", extra={"reason": reason}, exc_info=exc)
        return Verdict(False, {"status": "unready", "reason": reason})
    return Verdict(True, {"status": "ok"})


def _reason(exc: BaseException) -> str:
    """A failed probe's stable reason: the `XJobsError` code, a timeout, or that the read failed."""
    if isinstance(exc, XJobsError):
        return exc.code
    if isinstance(exc, TimeoutError):
        return PROBE_TIMEOUT
    return PROBE_FAILED


async def _call(probe: Probe) -> None:
    await probe()
