"""The Postgres job driver: every rule the memory backend pins, each operation one statement."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import asyncpg

from xjobs.contract.driver import (
    LAPSED_ON_FINAL_ATTEMPT,
    BulkResult,
    Claim,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobRecord,
    Nack,
    NewJob,
    RequeueFilter,
    assert_claim_queues,
)
from xjobs.errors import (
    BackendError,
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRequeueableError,
    JobRequeueDuplicateError,
)
from xjobs_pg.errors import interpret_error
from xjobs_pg.executor import Executor
from xjobs_pg.rows import buried_job, claimed_job, job_record, new_job_columns
from xjobs_pg.wake_slots import WakeSlots

TERMINAL_NACKS = frozenset({"dead", "fail"})
NEXT_STATE = {
    "retry": "ready",
    "shed": "ready",
    "park": "waiting",
    "dead": "dead",
    "fail": "failed",
}


class PostgresJobDriver:
    """Jobs in `<schema>.jobs`; claims lock with `skip locked`, settles are fenced on the claim."""

    def __init__(self, executor: Executor, wake: WakeSlots) -> None:
        self._x = executor
        self._wake = wake

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        if not jobs:
            return []
        results = await self._enqueue_fresh(jobs)
        pending = [(index, job) for index, job in enumerate(jobs) if index not in results]
        # A row the fast path did not insert is asked again, and a live row that finished between
        # the conflict and the lookup leaves it unanswered: it is asked once more.
        for _ in range(2):
            if not pending:
                break
            answered = await self._enqueue_once([job for _, job in pending])
            left: list[tuple[int, NewJob]] = []
            for (index, job), result in zip(pending, answered, strict=True):
                if result is None:
                    left.append((index, job))
                else:
                    results[index] = result
            pending = left
        if pending:
            raise BackendError(f"enqueue could not place job {pending[0][1].id} after two inserts")
        return [results[i] for i in range(len(jobs))]

    async def _enqueue_fresh(self, jobs: Sequence[NewJob]) -> dict[int, EnqueueResult]:
        """Insert the rows whose id and namespace are new, in one statement: index -> result."""
        try:
            rows = await self._x.pool.fetch(self._x.sql["enqueue_fresh"], *self._enqueue_args(jobs))
        except asyncpg.UniqueViolationError:
            return {}  # a publisher raced an id: `enqueue` answers the rows that won
        except Exception as exc:
            raise interpret_error(exc) from exc
        return {
            row["ord"] - 1: EnqueueResult(str(row["id"]), str(row["run_id"]), deduped=False)
            for row in rows
        }

    def _enqueue_args(self, jobs: Sequence[NewJob]) -> tuple[object, ...]:
        """The parameters both enqueue statements take: the columns as arrays, now, the wake."""
        now = self._x.now()
        due_by = now if now is not None else time.time_ns() // 1_000_000
        queues = sorted({j.queue for j in jobs if j.run_at_ms is None or j.run_at_ms <= due_by})
        return (
            *(list(column) for column in zip(*map(new_job_columns, jobs), strict=True)),
            now,
            self._wake.take(queues),
            self._wake.channel,
        )

    async def _enqueue_once(self, jobs: Sequence[NewJob]) -> list[EnqueueResult | None]:
        try:
            rows = await self._x.pool.fetch(self._x.sql["enqueue"], *self._enqueue_args(jobs))
        except asyncpg.UniqueViolationError:
            # Two publishers raced one id: the second insert of that id answers on the retry.
            return [None] * len(jobs)
        except Exception as exc:
            raise interpret_error(exc) from exc
        return [
            None
            if row["id"] is None
            else EnqueueResult(str(row["id"]), str(row["run_id"]), deduped=not row["inserted"])
            for row in rows
        ]

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        assert_claim_queues(options)
        names = list(options.queues)
        limits = [options.queues[name] for name in names]
        total = sum(limits) if options.limit is None else options.limit
        rows = await self._x.fetch(
            "claim",
            self._x.now(),
            names,
            limits,
            options.worker_id,
            total,
            options.lease_ms,
            options.presence_ttl_ms,
            LAPSED_ON_FINAL_ATTEMPT,
        )
        jobs = tuple(claimed_job(row, options.worker_id) for row in rows if not row["buried"])
        buried = tuple(buried_job(row) for row in rows if row["buried"])
        return ClaimResult(jobs=jobs, buried=buried)

    async def ack(self, claim: Claim) -> bool:
        now = self._x.now()
        return await self._x.execute("ack", now, claim.job_id, claim.worker_id, claim.claims) == 1

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        rows = await self._x.fetch(
            "ack_many",
            self._x.now(),
            [claim.job_id for claim in claims],
            [claim.worker_id for claim in claims],
            [claim.claims for claim in claims],
        )
        landed = {(str(row["id"]), row["claims"]) for row in rows}
        return [(claim.job_id, claim.claims) in landed for claim in claims]

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        writes_error = nack.kind != "shed" and nack.error is not None
        touched = await self._x.execute(
            "nack",
            self._x.now(),
            claim.job_id,
            claim.worker_id,
            claim.claims,
            NEXT_STATE[nack.kind],
            nack.run_at_ms,
            0 if nack.counts_as_attempt else 1,
            writes_error,
            nack.error,
            nack.kind in TERMINAL_NACKS,
        )
        return touched == 1

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        args = (self._x.now(), claim.job_id, claim.worker_id, claim.claims, lease_ms)
        return await self._x.execute("heartbeat", *args) == 1

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        args = (self._x.now(), claim.job_id, claim.worker_id, claim.claims, progress)
        return await self._x.execute("record_progress", *args) == 1

    async def _existing(self, job_id: str) -> JobRecord:
        record = await self.get(job_id)
        if record is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        return record

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRecord:
        _check_uuid(job_id)
        error = f"cancelled: {reason}" if reason else "cancelled"
        row = await self._x.fetchrow("cancel", self._x.now(), job_id, error)
        if row is not None:
            return job_record(row)
        record = await self._existing(job_id)
        raise JobNotCancellableError(
            f"job {job_id} is already {record.state}; only a live job can be cancelled"
        )

    async def requeue(self, job_id: str) -> JobRecord:
        _check_uuid(job_id)
        row = await self._x.fetchrow("requeue", self._x.now(), job_id)
        if row is not None:
            return job_record(row)
        record = await self._existing(job_id)
        if record.live:
            raise JobNotRequeueableError(
                f"job {job_id} is {record.state}; only a finished job can be requeued"
            )
        holder = await self._x.fetchrow("live_holder", job_id)
        raise JobRequeueDuplicateError(
            f"job {job_id} cannot be requeued: live job "
            f"{holder['id'] if holder else '(just finished)'} holds its idempotency key"
        )

    async def requeue_many(self, where: RequeueFilter) -> BulkResult:
        row = await self._x.fetchrow(
            "requeue_many", self._x.now(), list(where.states), where.queue, where.name, where.limit
        )
        assert row is not None
        return BulkResult(moved=row["moved"], remaining=row["remaining"])

    async def get(self, job_id: str) -> JobRecord | None:
        if not _is_uuid(job_id):
            return None
        row = await self._x.fetchrow("get_job", job_id)
        return None if row is None else job_record(row)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _check_uuid(job_id: str) -> None:
    if not _is_uuid(job_id):
        raise JobNotFoundError(f"no job has id {job_id!r} (a job id is a UUID)")
