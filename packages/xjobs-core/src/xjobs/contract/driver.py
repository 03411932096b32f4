"""The job-driver contract: the `JobDriver` protocol and the frozen wire records it speaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal, Protocol, runtime_checkable

from xjobs.errors import AppStateError, ClaimQueuesEmptyError

DRIVER_API_VERSION: Final = 3
"""The driver contract's version: a plugin states the one it was built for, `connect()` refuses another."""

JobState = Literal["ready", "running", "waiting", "completed", "failed", "dead", "cancelled"]
JOB_STATES: Final[tuple[JobState, ...]] = (
    "ready",
    "running",
    "waiting",
    "completed",
    "failed",
    "dead",
    "cancelled",
)
LIVE_STATES: Final[frozenset[str]] = frozenset({"ready", "running", "waiting"})
"""The states of a job not yet ended: an idempotency key on a live job dedupes a new enqueue."""
LAPSED_ON_FINAL_ATTEMPT: Final = "lease lapsed on the final attempt"

FINISHED_STATES: Final[frozenset[str]] = frozenset({"completed", "failed", "dead", "cancelled"})

# The `run_at_ms` of a parked run that waits for an event with no timeout: due only when woken.
WAIT_FOREVER_MS: Final = 2**53 - 1

Outcome = Literal[
    "completed",
    "retried",
    "dead-lettered",
    "dropped",
    "refused",
    "cancelled",
    "shed",
    "deferred",
    "suspended",
    "interrupted",
    "handed-back",
    "lease-lost",
]


@dataclass(frozen=True, slots=True)
class NewJob:
    """One row to enqueue; `payload` is the input's JSON text, encoded once by the facade."""

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    idempotency_key: str
    payload: str
    priority: int
    run_at_ms: int | None
    max_attempts: int
    dead_letter: bool
    enqueued_by: str | None
    traceparent: str | None
    # Flow control on the idempotency namespace (docs/flow-control.md), at most one of the two.
    # `debounce_ms`: a not-yet-claimed job of the namespace takes this row's payload and is due
    # `debounce_ms` after the driver's now (created so when none is). `throttle_ms`: a job of the
    # namespace created less than `throttle_ms` ago, live or finished, answers instead.
    debounce_ms: int | None = None
    throttle_ms: int | None = None


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What an enqueue answers: the job's id and run id, and whether a live job already held the namespace.

    Enqueued through a job's handle, `await result.result()` waits for what the job returned.
    """

    job_id: str
    run_id: str
    deduped: bool
    _handle: Any = field(default=None, compare=False, repr=False)

    async def result(self, timeout: timedelta | None = None) -> Any:  # noqa: ASYNC109 - the public API
        """What the job's body returned (`handle.result(job_id, timeout=...)`)."""
        if self._handle is None:
            raise AppStateError("this result was not answered by a job handle's enqueue")
        return await self._handle.result(self.job_id, timeout=timeout)


@dataclass(frozen=True, slots=True)
class Claim:
    """The fence every settle carries: which worker holds the job, under which claim number.

    `queue` is where the job lives; a driver whose keys are per queue (Redis) routes by it, and
    looks the job up when a caller built a claim without it. `run_id` is the run's, when the
    claim came from a `ClaimedJob` (Redis names the run's steps key by it, for their expiry).
    """

    job_id: str
    worker_id: str
    claims: int
    queue: str | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimOptions:
    """One claim pass: at most `queues[q]` jobs from each queue and `limit` in all, leased for `lease_ms`.

    Across queues the claim takes jobs in claim order (priority, run_at, id). With
    `presence_ttl_ms`, the same round trip refreshes the worker's registry row, so an idle
    worker's presence costs no statement of its own.
    """

    worker_id: str
    queues: Mapping[str, int]
    lease_ms: int
    presence_ttl_ms: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """A job this worker now holds, with every column the run needs (no read after the claim)."""

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    payload: str
    priority: int
    attempt: int
    max_attempts: int
    dead_letter: bool
    claims: int
    worker_id: str
    lease_until_ms: int
    enqueued_by: str | None
    traceparent: str | None
    created_at_ms: int
    # When the job was due (its `run_at`): the run's lateness is measured from it. Optional for
    # drivers built before it; `None` observes no lateness.
    due_at_ms: int | None = None

    @property
    def claim(self) -> Claim:
        """The fence this claim holds, as every settle and heartbeat of the run passes it."""
        return Claim(
            job_id=self.id,
            worker_id=self.worker_id,
            claims=self.claims,
            queue=self.queue,
            run_id=self.run_id,
        )


@dataclass(frozen=True, slots=True)
class BuriedJob:
    """A job whose lease lapsed on its final attempt: the claim settled it `dead` (or `failed`) instead."""

    id: str
    run_id: str
    name: str
    queue: str
    tenant_id: str | None
    payload: str
    state: Literal["dead", "failed"]
    attempt: int


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """What one claim pass moved: the jobs handed to this worker, and the ones it buried."""

    jobs: tuple[ClaimedJob, ...]
    buried: tuple[BuriedJob, ...] = ()


NackState = Literal["ready", "waiting", "dead", "failed"]
TERMINAL_NACK_STATES: Final[frozenset[str]] = frozenset({"dead", "failed"})


@dataclass(frozen=True, slots=True)
class Nack:
    """How a run that did not complete settles, decided by the settle room; a driver stores it as is.

    `state` is the job's next state: `ready` (a retry, a shed, a hand-back) and `waiting` (a park)
    are due again at `run_at_ms` (`None`: the driver's now); `dead` and `failed` are terminal and
    keep `run_at_ms`. `error`, when given, is written to `last_error`. `counts_as_attempt=False`
    hands the claim's attempt back. `outcome` is the ending's name, as counters and logs read it.
    """

    state: NackState
    outcome: Outcome
    run_at_ms: int | None = None
    error: str | None = None
    counts_as_attempt: bool = True

    @property
    def terminal(self) -> bool:
        """Whether the job is finished by this settle (`dead` or `failed`)."""
        return self.state in TERMINAL_NACK_STATES

    @property
    def writes_error(self) -> bool:
        """Whether this settle writes `last_error`."""
        return self.error is not None


MoveStatus = Literal["done", "missing", "finished", "live", "duplicate"]


@dataclass(frozen=True, slots=True)
class JobMove:
    """What a driver answers to `cancel` or `requeue`; core raises the one refusal for each status.

    `done` carries the moved job's `record`; `finished` (cancel) and `live` (requeue) carry the
    job's current `state`; `duplicate` (requeue) carries the id of the live job that holds the
    namespace in `holder`, when the driver knows it.
    """

    status: MoveStatus
    record: JobRecord | None = None
    state: str | None = None
    holder: str | None = None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """A bulk operator move: how many rows it moved and how many a second call would move."""

    moved: int
    remaining: int


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job as an operator or a test reads it."""

    id: str
    run_id: str
    name: str
    queue: str
    state: JobState
    tenant_id: str | None
    idempotency_key: str
    payload: str
    priority: int
    attempt: int
    max_attempts: int
    dead_letter: bool
    claims: int
    claimed_by: str | None
    lease_until_ms: int | None
    run_at_ms: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int | None
    last_error: str | None
    progress: float | None
    enqueued_by: str | None
    traceparent: str | None

    @property
    def live(self) -> bool:
        """Whether the job is still waiting or running (not yet in a final state)."""
        return self.state in LIVE_STATES


@runtime_checkable
class JobDriver(Protocol):
    """The queue of one engine. Every settle is fenced on `state = 'running'` and the claim.

    "Now" is the driver's now: the server's clock where the backend runs on the system clock and
    the engine has one (Postgres passes null, Redis `''`), else the injected clock. A write that
    ends an attempt bumps the minute counter of its outcome (`COUNTED_OUTCOMES`) in the same
    atomic step, and one that writes `last_error` for a failed attempt appends its
    `AttemptError` too. The table of every duty: docs/writing-a-driver.md.
    """

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Insert each job unless a live job holds its namespace; one round trip for the batch.

        A row is `ready`, due at `run_at_ms` (`None`: now). `debounce_ms` and `throttle_ms` are
        the driver's to apply (see `NewJob`). Counts nothing. Answers one result per row, in
        order: a deduped row answers the holder's ids with `deduped=True`.
        """
        ...

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        """Move up to the asked number of ready jobs to `running`, and bury exhausted lapsed leases.

        Refuses a claim over no queue (`assert_claim_queues`) first. Buries each lapsed lease of
        the asked queues on its final attempt (`dead` or `failed`, `last_error` =
        `LAPSED_ON_FINAL_ATTEMPT` and its attempt error, counted `dead-lettered` or `dropped`);
        then takes due jobs in claim order, skipping paused queues and paused job names:
        `running`, attempt and claims + 1, `claimed_by`, lease until now + `lease_ms`.
        """
        ...

    async def ack(self, claim: Claim) -> bool:
        """Settle a run `completed` (finish time, lease cleared) and count `completed`; answers
        whether the fence held. `ResultStore.complete` is the same write with a result."""
        ...

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        """Settle a run that did not complete, storing `nack` as handed; answers whether the
        fence held.

        Writes `nack.state`; due at `run_at_ms` (`None`: now) unless terminal (then the finish
        time); `counts_as_attempt=False` takes the attempt back; `writes_error` writes
        `last_error` and appends the attempt error. Counts `nack.outcome` when it is counted.
        """
        ...

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        """Extend the lease by `lease_ms` from the driver's now; answers whether the fence held."""
        ...

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        """Store the run's progress (0.0 to 1.0); answers whether the fence held."""
        ...

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        """Cancel a live job (`done`); answers `finished` or `missing` otherwise, writing nothing.

        Writes `cancelled`, the finish time, `last_error` `cancelled[: reason]` (no attempt
        error: no attempt failed) and counts `cancelled`.
        """
        ...

    async def requeue(self, job_id: str) -> JobMove:
        """Put a finished job back to `ready` with its attempts reset, in one statement (`done`).

        Answers `missing`, `live`, or `duplicate` (a live job holds its namespace) otherwise.
        """
        ...

    async def get(self, job_id: str) -> JobRecord | None:
        """One job, or `None`."""
        ...


@runtime_checkable
class BatchAck(Protocol):
    """A driver that settles many runs `completed` in one round trip, each fenced on its claim.

    A backend whose driver offers it declares the `ack_many` capability. Each landed claim is
    written and counted exactly as `ack` would.
    """

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        """Per claim, in order: whether it still owned its job and the job is now completed."""
        ...


def assert_claim_queues(options: ClaimOptions) -> None:
    """Refuse a claim over no queue (every driver calls this first)."""
    if not options.queues:
        raise ClaimQueuesEmptyError("claim needs at least one queue; got none")
