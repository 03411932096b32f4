"""What the execution and worker scenarios share: input models, recorders and a few waits.

The job declarations themselves live inside each scenario, closing over that scenario's
recorders, so no two scenarios share state through a module-level handle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from xjobs.actor import Actor, current_actor
from xjobs.app import App
from xjobs.contract.driver import (
    Claim,
    ClaimedJob,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobDriver,
    JobMove,
    JobRecord,
    Nack,
    NewJob,
)
from xjobs.declare.retry import Retry
from xjobs.run.settled import Settled
from xjobs.testing.parity.env import ParityEnv

QUEUE = "parity-run"
LEASE = timedelta(milliseconds=300)  # the shortest lease a worker takes: a heartbeat every 100 ms
NOW_RETRY = Retry(attempts=3, base=timedelta(0), cap=timedelta(0))
# A bound that fails a hung scenario, not a timing: a loaded CI machine through pgbouncer polls.
WAIT_S = 10.0


class Item(BaseModel):
    """The input of most scenario jobs: an org (the run's tenant) and a key (its idempotency key)."""

    org: str = "org-1"
    key: str = "k-1"


def org_of(value: Item) -> str:
    """The org a scenario job's input acts for (its `tenant=` function)."""
    return value.org


def key_of(value: Item) -> str:
    """The idempotency key a scenario job's input derives (its `idempotency_key=` function)."""
    return value.key


async def eventually(
    predicate: Callable[[], bool], *, what: str, timeout_s: float = WAIT_S
) -> None:
    """Wait (polling every few ms, bounded) until `predicate()` holds; fail the scenario if it never does."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.005)


async def within(awaitable: Any, *, what: str, timeout_s: float = WAIT_S) -> Any:
    """Await `awaitable`, failing the scenario (not hanging it) when it takes longer than `timeout_s`."""
    try:
        return await asyncio.wait_for(awaitable, timeout_s)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}") from None


@dataclass
class Overlap:
    """Counts bodies running at once, and the most that ever ran together."""

    now: int = 0
    most: int = 0
    entered: int = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        """Count one body running for the duration of the block."""
        self.now += 1
        self.entered += 1
        self.most = max(self.most, self.now)
        try:
            yield
        finally:
            self.now -= 1


@dataclass
class SettledLog:
    """An `on_settled` hook that records each event with the ambient actor it ran under."""

    events: list[Settled] = field(default_factory=list)
    actors: list[Actor | None] = field(default_factory=list)

    async def __call__(self, event: Settled) -> None:
        """Record a settled event with the actor in effect when the hook ran."""
        self.events.append(event)
        self.actors.append(current_actor())

    def outcomes(self) -> list[str]:
        """The outcome of each recorded settle, in order."""
        return [event.outcome for event in self.events]

    def for_job(self, job_id: str) -> list[Settled]:
        """The recorded settles of one job, in order."""
        return [event for event in self.events if event.job_id == job_id]


async def reclaim_lapsed(
    parity: ParityEnv, queue: str, *, lease_ms: int, worker_id: str = "worker-b"
) -> ClaimedJob:
    """Let the held lease lapse on the manual clock, then claim the job as another worker.

    A heartbeat of the first holder may land between the clock move and the claim (on a backend
    whose claim is a round trip); the clock is then moved past that renewal too, a bounded number of times.
    """
    for _ in range(20):
        parity.clock.advance(lease_ms + 1)
        result = await parity.claim({queue: 1}, worker_id=worker_id, lease_ms=30_000)
        if result.jobs:
            return result.jobs[0]
    raise AssertionError(f"the lapsed lease in {queue!r} was never claimable by {worker_id}")


class CountingDriver:
    """A `JobDriver` that forwards every call to the real one, with a few faults a scenario can switch on.

    It counts the enqueue round trips. With `hold_claims` set, each claim runs on the backend and
    then waits for `release_claims` before answering: a claim round still in flight, as a drain may
    race it. `failing_heartbeats`, `failing_acks` and `failing_nacks` make that many of the next
    such calls raise, as an unreachable store would.
    """

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner
        self.enqueue_calls: list[int] = []
        self.hold_claims = False
        self.release_claims = asyncio.Event()
        self.held: list[ClaimResult] = []
        self.failing_heartbeats = 0  # how many of the next heartbeats raise (a store blip)
        self.failing_acks = 0
        self.failing_nacks = 0
        self.settles: list[str] = []  # each ack or nack call: "ack", "nack", or "raised"
        self.heartbeats: list[bool | None] = []  # each beat: landed, missed, or raised (None)

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Enqueue through the real driver, counting the round trip and its rows."""
        self.enqueue_calls.append(len(jobs))
        return await self.inner.enqueue(jobs)

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        """Claim through the real driver; with `hold_claims`, answer once `release_claims` is set."""
        result = await self.inner.claim(options)
        if self.hold_claims and result.jobs:
            self.held.append(result)
            await self.release_claims.wait()
        return result

    async def ack(self, claim: Claim) -> bool:
        """Ack through the real driver, or raise while `failing_acks` lasts."""
        if self.failing_acks > 0:
            self.failing_acks -= 1
            self.settles.append("raised")
            raise ConnectionError("the store did not answer the ack")
        self.settles.append("ack")
        return await self.inner.ack(claim)

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        """Nack through the real driver, or raise while `failing_nacks` lasts."""
        if self.failing_nacks > 0:
            self.failing_nacks -= 1
            self.settles.append("raised")
            raise ConnectionError("the store did not answer the nack")
        self.settles.append("nack")
        return await self.inner.nack(claim, nack)

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        """Renew through the real driver, or raise while `failing_heartbeats` lasts."""
        if self.failing_heartbeats > 0:
            self.failing_heartbeats -= 1
            self.heartbeats.append(None)
            raise ConnectionError("the store did not answer the heartbeat")
        held = await self.inner.heartbeat(claim, lease_ms)
        self.heartbeats.append(held)
        return held

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        """Record progress through the real driver."""
        return await self.inner.record_progress(claim, progress)

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        """Cancel through the real driver."""
        return await self.inner.cancel(job_id, reason)

    async def requeue(self, job_id: str) -> JobMove:
        """Requeue through the real driver."""
        return await self.inner.requeue(job_id)

    async def get(self, job_id: str) -> JobRecord | None:
        """Read the job through the real driver."""
        return await self.inner.get(job_id)


def counting_app(
    parity: ParityEnv, jobs: Sequence[object], **options: Any
) -> tuple[App, CountingDriver]:
    """An app over the scenario's backend whose job driver is a `CountingDriver` over the real one."""
    driver = CountingDriver(parity.backend.jobs)
    backend = replace(parity.backend, jobs=driver)
    return App(backend, jobs=jobs, clock=parity.clock, **options), driver
