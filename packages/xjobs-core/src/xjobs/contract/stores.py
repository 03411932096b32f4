"""The protocols of the durable stores beside the job driver; each backend implements the ones it declares."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from xjobs.contract.driver import Claim, EnqueueResult, Nack, NewJob


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker process as the registry shows it."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    started_at_ms: int
    last_seen_ms: int


@runtime_checkable
class WorkerRegistry(Protocol):
    """Which worker processes are alive; a row expires `ttl_ms` after its last beat.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        """Write (or overwrite) this worker's row."""
        ...

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        """Refresh `last_seen`; answers whether the row was still there."""
        ...

    async def forget(self, worker_id: str) -> None:
        """Remove this worker's row (on stop)."""
        ...

    async def list(self) -> list[WorkerInfo]:
        """The rows that have not expired, sorted by id."""
        ...


@dataclass(frozen=True, slots=True)
class SlotHolder:
    """Who holds one fleet concurrency slot: a job id under one claim."""

    job_id: str
    claims: int


@runtime_checkable
class SlotStore(Protocol):
    """Fleet-wide concurrency slots: a row per held slot, owned by (job id, claim), with a TTL.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def acquire(self, key: str, holder: SlotHolder, limit: int, ttl_ms: int) -> bool:
        """Take a slot of `key` unless `limit` unexpired holders have one already (a holder's own slot counts once)."""
        ...

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        """Extend the holder's slot; answers whether it still held it."""
        ...

    async def release(self, key: str, holder: SlotHolder) -> bool:
        """Give the slot back (idempotent); answers whether it was held."""
        ...

    async def holders(self, key: str) -> list[SlotHolder]:
        """The unexpired holders of `key`."""
        ...


StepStatus = Literal["done", "error", "pending"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of a run: its JSON result (`done`), the error it raised (`error`), or a wait's state (`pending`).

    `position` is the step's place in the run's order (0, 1, …), stable across replays.
    """

    run_id: str
    name: str
    status: StepStatus
    result: str | None
    error: str | None
    position: int
    created_at_ms: int


@runtime_checkable
class StepStore(Protocol):
    """Memoized step records per run; writes are fenced on the job's claim.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        """Every recorded step of a run, by position (the one hydrate per run); `queue` is the job's."""
        ...

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        """Write a step fenced on `state = 'running'` and the claim (worker id, claims).

        A record of the same name is replaced unless it is `done` (a memoized result is never
        overwritten). Answers whether the write landed.
        """
        ...


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One sent event; `payload` is the JSON text of an object, `tenant` the org it was sent in
    (`None`: the untenanted scope)."""

    id: str
    name: str
    payload: str
    sent_at_ms: int
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class EventWait:
    """A parked run's registration for one event (a job waits for one event at a time).

    `match` is the JSON text of an object: each of its top-level keys must be present in the
    event's payload with an equal JSON value (deep equality; `true` is not `1`, `1` is `1.0`,
    numbers by exact decimal value, so an integer beyond 2^53 equals only itself). `tenant` is
    the run's (`None`: the untenanted scope); only an event sent in the same tenant matches.
    """

    job_id: str
    run_id: str
    queue: str
    step: str
    event: str
    match: str
    since_ms: int
    deadline_ms: int | None
    tenant: str | None = None


@runtime_checkable
class EventBus(Protocol):
    """Events for `step.wait_for_event`, with ONE clock: `now()` stamps waits, sends and timeouts.

    Events are scoped by tenant: an event sent in one tenant (`None` is the untenanted scope, a
    scope of its own) is stored with it and never wakes, nor is found by, a wait of another.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def now(self) -> int:
        """The bus's clock, in epoch ms (the server's where there is one, else the injected clock)."""
        ...

    async def send(self, name: str, payload: str, *, tenant: str | None = None) -> EventRecord:
        """Store an event of `tenant` stamped `now()` and, atomically with it, wake every parked run
        of that tenant whose wait it matches (its job goes from `waiting` to due now, if it still
        waits under that run id); those waits are dropped."""
        ...

    async def find(
        self, name: str, match: str, since_ms: int, *, tenant: str | None = None
    ) -> EventRecord | None:
        """The earliest stored event of `name` sent in `tenant` matching `match` with
        `sent_at_ms >= since_ms` (ordered by `sent_at_ms`, then id)."""
        ...

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        """Atomically register `wait` (replacing the job's earlier wait) and park the claimed job.

        The park stores the settle room's `nack` (`waiting`, the attempt handed back) with the
        driver's fence (state running and the claim). The job is due at `nack.run_at_ms`, or now
        when an event of the wait's tenant matching it was sent at or after `wait.since_ms` (so an
        event sent between the run's last look and the park is not lost). Answers whether the park
        landed.
        """
        ...

    async def purge_expired(self, older_than_ms: int) -> int:
        """Delete events sent before `older_than_ms` and waits whose deadline passed before it;
        answers how many went."""
        ...


OUTBOX_WAKE = ":outbox"  # the wake payload a stage sends; no queue name can spell it


@runtime_checkable
class OutboxStore(Protocol):
    """Jobs staged inside a caller's transaction, relayed to the queue afterwards.

    A staged row is a complete `NewJob`: its id IS its job's id and its run id is allocated at
    stage. The relay's claim is a lease (`claimed_by`, an expiry) taken in one statement; every
    later mutation is fenced on it. A published row is marked (or deleted, in memory) and
    retention of marked rows is bounded.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    def stage_on(
        self, conn: object, rows: Sequence[NewJob]
    ) -> list[EnqueueResult] | Awaitable[list[EnqueueResult]]:
        """Insert `rows` on the caller's OWN connection, inside its transaction (nothing is
        committed here; a rollback leaves nothing). A sync connection answers the results at
        once, an async one an awaitable of them. A connection of a kind this store cannot use is
        `XJOBS_OUTBOX_CONNECTION_INVALID`."""
        ...

    async def stage(self, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        """Stage `rows` in a transaction of the store's own, committed before it answers."""
        ...

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        """Lease up to `limit` unpublished rows whose lease is free or lapsed, oldest staged
        first, for `relay_id` until `lease_ms` from now; one atomic step."""
        ...

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        """Mark the rows of `ids` this relay still holds as published; answers how many it held.
        A row whose lease moved to another relay is left alone."""
        ...

    async def pending(self) -> int:
        """How many staged rows are not yet published (claimed or not)."""
        ...


@dataclass(frozen=True, slots=True)
class TaskFire:
    """The last occurrence of a task that DISPATCHED a job (arming and skipping never write one)."""

    task: str
    occurrence_ms: int
    job_id: str
    fired_at_ms: int


@runtime_checkable
class SchedulerState(Protocol):
    """Each task's watermark (the fence every fire moves), its last fire, and its pause row.

    A watermark is an epoch-ms instant: every occurrence at or before it is done with (fired,
    skipped, or before the task was first seen). It only moves through `arm` and `fire`, each a
    compare-and-set from the value the scheduler read, so two schedulers racing one occurrence
    move it once.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        """The watermark of each named task that has one (a task never armed is absent)."""
        ...

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        """Move the watermark from `previous_ms` (`None`: no row yet) to `watermark_ms` without a job.

        Answers whether it moved; a watermark that is not `previous_ms` any more is left alone.
        """
        ...

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        """In one atomic statement: move the watermark from `previous_ms` to `occurrence_ms`, and
        only if it moved, enqueue `job` (deduped on its idempotency key like any enqueue) and
        record the task's fire. Answers whether the watermark moved."""
        ...

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        """The last fire of each named task (`None`: every task) that ever dispatched."""
        ...

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        """Which of the named tasks are paused."""
        ...

    async def pause(self, task: str) -> bool:
        """Pause a task (its watermark is kept); answers whether it was running before."""
        ...

    async def resume(self, task: str) -> bool:
        """Resume a task; answers whether it was paused. Its catch-up policy applies next round."""
        ...


@runtime_checkable
class LeaderElection(Protocol):
    """Which scheduler process leads: at most one candidate holds leadership at any instant.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        """Take or renew leadership for `candidate` for `ttl_ms`; answers whether it leads.

        One round trip. A lapsed holder is replaced; a live other holder is not.
        """
        ...

    async def release(self, candidate: str) -> None:
        """Give leadership up if `candidate` holds it (a no-op otherwise)."""
        ...
