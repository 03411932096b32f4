"""The job statements' parameters (jobs, settle, operator, results, outbox): a record each, whose one `bind()` is its `$n` order.

The operator surface's statements (listing, bulk, ledger) have theirs in `operator_params`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from xjobs.contract.driver import Claim, ClaimOptions, Nack, NewJob
from xjobs.contract.introspection import COUNTED_OUTCOMES

Bound = tuple[object, ...]
JOB_COLUMNS = 13  # the inserted columns of a new job, as `job_columns` lists them


class Params(Protocol):
    """A statement's parameters; `bind()` is their one positional order (`$1` first)."""

    def bind(self) -> Bound: ...


@dataclass(frozen=True, slots=True)
class NoParams:
    """A statement with no parameter."""

    def bind(self) -> Bound:
        return ()


NO_PARAMS = NoParams()


@dataclass(frozen=True, slots=True)
class One:
    """A statement whose one parameter is `$1` (a job id, a run id, a key, a name)."""

    value: object

    def bind(self) -> Bound:
        return (self.value,)


def job_columns(job: NewJob) -> Bound:
    """A new job's inserted columns, in the order the enqueue, fire and stage statements take them."""
    return (
        job.id,
        job.run_id,
        job.name,
        job.queue,
        job.tenant_id,
        job.idempotency_key,
        job.payload,
        job.priority,
        job.run_at_ms,
        job.max_attempts,
        job.dead_letter,
        job.enqueued_by,
        job.traceparent,
    )


def job_arrays(jobs: Sequence[NewJob]) -> Bound:
    """The same columns as one array each, for the statements that unnest a batch."""
    if not jobs:
        return tuple([] for _ in range(JOB_COLUMNS))
    return tuple(list(column) for column in zip(*map(job_columns, jobs), strict=True))


def fence(claim: Claim) -> Bound:
    """The claim every settle is fenced on: job id, worker id, claims."""
    return (claim.job_id, claim.worker_id, claim.claims)


# -- jobs.sql --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnqueueParams:
    """`enqueue` and `enqueue_fresh`: $1..$13 the job columns as arrays, $14 now, $15 the queues to wake, $16 the channel."""

    now_ms: int | None
    jobs: Sequence[NewJob]
    wake: list[str]
    channel: str

    def bind(self) -> Bound:
        return (*job_arrays(self.jobs), self.now_ms, self.wake, self.channel)


@dataclass(frozen=True, slots=True)
class EnqueueOneParams:
    """`enqueue_one`: $1..$13 the columns of one job, $14 now, $15 the queues to wake, $16 the channel."""

    now_ms: int | None
    job: NewJob
    wake: list[str]
    channel: str

    def bind(self) -> Bound:
        return (*job_columns(self.job), self.now_ms, self.wake, self.channel)


@dataclass(frozen=True, slots=True)
class FlowEnqueueParams:
    """`enqueue_flow`: `EnqueueParams`' $1..$16, then $17 each row's debounce and $18 its throttle window."""

    enqueue: EnqueueParams

    def bind(self) -> Bound:
        jobs = self.enqueue.jobs
        return (
            *self.enqueue.bind(),
            [job.debounce_ms for job in jobs],
            [job.throttle_ms for job in jobs],
        )


@dataclass(frozen=True, slots=True)
class ClaimParams:
    """`claim`: $1 now, $2 queues, $3 their limits, $4 worker, $5 total, $6 lease, $7 presence TTL, $8 the burial error."""

    now_ms: int | None
    options: ClaimOptions
    buried_error: str

    def bind(self) -> Bound:
        o = self.options
        names = list(o.queues)
        limits = [o.queues[name] for name in names]
        total = sum(limits) if o.limit is None else o.limit
        return (
            self.now_ms,
            names,
            limits,
            o.worker_id,
            total,
            o.lease_ms,
            o.presence_ttl_ms,
            self.buried_error,
        )


# -- settle.sql ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AckParams:
    """`ack`: $1 now, $2..$4 the claim."""

    now_ms: int | None
    claim: Claim

    def bind(self) -> Bound:
        return (self.now_ms, *fence(self.claim))


@dataclass(frozen=True, slots=True)
class CompleteParams:
    """`complete`: $1 now, $2..$4 the claim, $5 the result (JSON text)."""

    now_ms: int | None
    claim: Claim
    result: str

    def bind(self) -> Bound:
        return (self.now_ms, *fence(self.claim), self.result)


@dataclass(frozen=True, slots=True)
class AckManyParams:
    """`ack_many`: $1 now, $2 job ids, $3 worker ids, $4 claims (parallel arrays)."""

    now_ms: int | None
    claims: Sequence[Claim]

    def bind(self) -> Bound:
        return (
            self.now_ms,
            [claim.job_id for claim in self.claims],
            [claim.worker_id for claim in self.claims],
            [claim.claims for claim in self.claims],
        )


@dataclass(frozen=True, slots=True)
class NackParams:
    """`nack` (the driver's, and the event bus's park): the settle room's `Nack` stored as handed.

    $1 now, $2..$4 the claim, $5 the next state, $6 run_at, $7 one when the attempt is handed
    back, $8 whether last_error is written, $9 the error, $10 whether the state is terminal,
    $11 the outcome when the counters count it (`None`: a shed, a park, a hand-back).
    """

    now_ms: int | None
    claim: Claim
    nack: Nack

    def bind(self) -> Bound:
        n = self.nack
        return (
            self.now_ms,
            *fence(self.claim),
            n.state,
            n.run_at_ms,
            0 if n.counts_as_attempt else 1,
            n.writes_error,
            n.error,
            n.terminal,
            n.outcome if n.outcome in COUNTED_OUTCOMES else None,
        )


@dataclass(frozen=True, slots=True)
class HeartbeatParams:
    """`heartbeat`: $1 now, $2..$4 the claim, $5 the lease."""

    now_ms: int | None
    claim: Claim
    lease_ms: int

    def bind(self) -> Bound:
        return (self.now_ms, *fence(self.claim), self.lease_ms)


@dataclass(frozen=True, slots=True)
class ProgressParams:
    """`record_progress`: $1 now, $2..$4 the claim, $5 the progress."""

    now_ms: int | None
    claim: Claim
    progress: float

    def bind(self) -> Bound:
        return (self.now_ms, *fence(self.claim), self.progress)


# -- operator.sql ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CancelParams:
    """`cancel`: $1 now, $2 job id, $3 the error written."""

    now_ms: int | None
    job_id: str
    error: str

    def bind(self) -> Bound:
        return (self.now_ms, self.job_id, self.error)


@dataclass(frozen=True, slots=True)
class RequeueParams:
    """`requeue`: $1 now, $2 job id."""

    now_ms: int | None
    job_id: str

    def bind(self) -> Bound:
        return (self.now_ms, self.job_id)


# -- results.sql -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatchParams:
    """`result_watch`: $1 job id, $2 the waiting call's token, $3 the channel its finishing
    statement notifies, $4 now (`None`: the server clock), $5 how long the row outlives now."""

    job_id: str
    token: str
    channel: str
    now_ms: int | None
    ttl_ms: int

    def bind(self) -> Bound:
        return (self.job_id, self.token, self.channel, self.now_ms, self.ttl_ms)


@dataclass(frozen=True, slots=True)
class UnwatchParams:
    """`result_unwatch`: $1 job id, $2 the waiting call's token."""

    job_id: str
    token: str

    def bind(self) -> Bound:
        return (self.job_id, self.token)


# -- outbox.sql ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StageParams:
    """`outbox_stage`: $1 now, $2..$14 the job columns as arrays, $15 the wake payloads, $16 the channel."""

    now_ms: int | None
    rows: Sequence[NewJob]
    wake: list[str]
    channel: str

    def bind(self) -> Bound:
        return (self.now_ms, *job_arrays(self.rows), self.wake, self.channel)


@dataclass(frozen=True, slots=True)
class RelayClaimParams:
    """`outbox_claim`: $1 now, $2 relay, $3 limit, $4 lease."""

    now_ms: int | None
    relay_id: str
    limit: int
    lease_ms: int

    def bind(self) -> Bound:
        return (self.now_ms, self.relay_id, self.limit, self.lease_ms)


@dataclass(frozen=True, slots=True)
class MarkParams:
    """`outbox_mark`: $1 now, $2 relay, $3 ids, $4 retention, $5 purge limit."""

    now_ms: int | None
    relay_id: str
    ids: Sequence[str]
    retention_ms: int
    purge_limit: int

    def bind(self) -> Bound:
        return (self.now_ms, self.relay_id, list(self.ids), self.retention_ms, self.purge_limit)
