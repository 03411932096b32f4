"""The protocols of the durable stores beside the job driver; each backend implements the ones it declares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from xjobs.driver import Claim, NewJob


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
    """Which worker processes are alive; a row expires `ttl_ms` after its last beat."""

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
class LeaseStore(Protocol):
    """Fleet-wide concurrency slots: a row per held slot, owned by (job id, claim), with a TTL."""

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


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One memoized step of a run: its JSON result, or the error it raised."""

    run_id: str
    name: str
    result: str | None
    error: str | None
    created_at_ms: int


@runtime_checkable
class StepStore(Protocol):
    """Memoized step results per run; writes are fenced on the job's claim."""

    async def list(self, run_id: str) -> list[StepRecord]:
        """Every recorded step of a run (the one hydrate per run)."""
        ...

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        """Record a step unless the claim moved on; answers whether it landed."""
        ...


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One sent event."""

    id: str
    name: str
    payload: str
    sent_at_ms: int


@runtime_checkable
class EventBus(Protocol):
    """Events for `step.wait_for_event`, with one clock for waits and timeouts."""

    async def now(self) -> int:
        """The bus's clock, in epoch ms."""
        ...

    async def send(self, name: str, payload: str) -> EventRecord:
        """Store an event and wake the runs waiting for it."""
        ...

    async def find(self, name: str, match: dict[str, Any], since_ms: int) -> EventRecord | None:
        """The first stored event of `name` matching `match` sent at or after `since_ms`."""
        ...

    async def purge_expired(self, older_than_ms: int) -> int:
        """Delete events sent before `older_than_ms`; answers how many went."""
        ...


@runtime_checkable
class OutboxStore(Protocol):
    """Jobs staged inside a caller's transaction, relayed to the queue afterwards."""

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        """Lease up to `limit` staged rows for this relay."""
        ...

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        """Mark rows this relay holds as published; answers how many it still held."""
        ...


@runtime_checkable
class SchedulerState(Protocol):
    """Each task's watermark and the atomic fire that moves it."""

    async def watermark(self, task: str) -> int | None:
        """The last occurrence the task's watermark passed, or `None` before its first."""
        ...

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        """Move the watermark from `previous_ms` to `occurrence_ms` and insert `job` only if it moved."""
        ...


@runtime_checkable
class LeaderElection(Protocol):
    """Which scheduler process leads."""

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        """Take or renew leadership for `candidate`; answers whether it leads."""
        ...

    async def release(self, candidate: str) -> None:
        """Give leadership up if `candidate` holds it."""
        ...


@runtime_checkable
class BackfillLedger(Protocol):
    """What each backfill run swept, keyed by run."""

    async def record(self, run_id: str, name: str, status: str, count: int) -> None:
        """Write a run's ledger row."""
        ...

    async def completed(self, name: str) -> bool:
        """Whether any run of `name` completed (only `completed` blocks a re-run)."""
        ...
