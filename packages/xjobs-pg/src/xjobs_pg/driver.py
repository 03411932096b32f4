"""The Postgres job driver: every rule the memory backend pins, each operation one statement."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import asyncpg

from xjobs.contract.driver import (
    LAPSED_ON_FINAL_ATTEMPT,
    Claim,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobMove,
    JobRecord,
    Nack,
    NewJob,
    assert_claim_queues,
)
from xjobs.errors import BackendError
from xjobs_pg.errors import interpret_error
from xjobs_pg.executor import Executor
from xjobs_pg.params import (
    AckManyParams,
    AckParams,
    CancelParams,
    ClaimParams,
    EnqueueOneParams,
    EnqueueParams,
    FlowEnqueueParams,
    HeartbeatParams,
    NackParams,
    One,
    Params,
    ProgressParams,
    RequeueParams,
)
from xjobs_pg.rows import buried_job, claimed_job, job_record
from xjobs_pg.wake_slots import WakeSlots


class PostgresJobDriver:
    """Jobs in `<schema>.jobs`; claims lock with `skip locked`, settles are fenced on the claim."""

    def __init__(self, executor: Executor, wake: WakeSlots) -> None:
        self._x = executor
        self._wake = wake

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        if not jobs:
            return []
        if any(job.debounce_ms is not None or job.throttle_ms is not None for job in jobs):
            return await self._enqueue_flow(jobs)
        results = await self._enqueue_fresh(jobs)
        pending = [(index, job) for index, job in enumerate(jobs) if index not in results]
        # At most two inserts: a row the fast path did not insert is asked once more through
        # `enqueue`, which answers it through its conflict (the live row, even one committed after
        # its snapshot, or its own insert if that row finished meanwhile), never by a lookup alone.
        if pending:
            answered = await self._enqueue_once([job for _, job in pending])
            for (index, job), result in zip(pending, answered, strict=True):
                if result is None:
                    raise BackendError(f"enqueue could not place job {job.id} after two inserts")
                results[index] = result
        return [results[i] for i in range(len(jobs))]

    async def _enqueue_fresh(self, jobs: Sequence[NewJob]) -> dict[int, EnqueueResult]:
        """Insert the rows whose id and namespace are new, in one statement: index -> result.
        One row goes through `enqueue_one` (its columns bound as they are), a batch through
        `enqueue_fresh` (as arrays)."""
        now = self._x.now()
        wake = self._wake.take(_due_queues(jobs, now))
        params: Params
        if len(jobs) == 1:
            name, params = "enqueue_one", EnqueueOneParams(now, jobs[0], wake, self._wake.channel)
        else:
            name, params = "enqueue_fresh", EnqueueParams(now, jobs, wake, self._wake.channel)
        try:
            rows = await self._x.lanes.fetch(self._x.sql[name], *params.bind())
        except asyncpg.UniqueViolationError:
            return {}  # never expected (every unique index arbitrates): `enqueue` answers them all
        except Exception as exc:
            raise interpret_error(exc) from exc
        # The row that landed is the input row of its ordinal: its own id and run id.
        landed = (jobs[row["ord"] - 1] for row in rows)
        return {
            row["ord"] - 1: EnqueueResult(job.id, job.run_id, deduped=False)
            for row, job in zip(rows, landed, strict=True)
        }

    def _enqueue(self, jobs: Sequence[NewJob]) -> EnqueueParams:
        """The parameters of `enqueue`: the rows, now, the queues to wake."""
        now = self._x.now()
        wake = self._wake.take(_due_queues(jobs, now))
        return EnqueueParams(now, jobs, wake, self._wake.channel)

    async def _enqueue_flow(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Debounced or throttled rows: one `enqueue_flow` per run of rows with distinct
        namespaces (the facade sends one; a row repeating a namespace starts the next)."""
        results: list[EnqueueResult] = []
        start = 0
        seen: set[tuple[str, str, str]] = set()
        for end, job in enumerate([*jobs, None]):
            namespace = ("", "", "") if job is None else _namespace(job)
            if job is not None and namespace not in seen:
                seen.add(namespace)
                continue
            results += await self._enqueue_flow_once(jobs[start:end])
            start, seen = end, {namespace}
        return results

    async def _enqueue_flow_once(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        now = self._x.now()
        due_by = now if now is not None else time.time_ns() // 1_000_000
        queues = sorted(
            {
                j.queue
                for j in jobs
                if j.debounce_ms is None and (j.run_at_ms is None or j.run_at_ms <= due_by)
            }
        )
        params = FlowEnqueueParams(
            EnqueueParams(now, jobs, self._wake.take(queues), self._wake.channel)
        )
        try:
            rows = await self._x.lanes.fetch(self._x.sql["enqueue_flow"], *params.bind())
        except Exception as exc:
            raise interpret_error(exc) from exc
        results: list[EnqueueResult] = []
        for job, row in zip(jobs, rows, strict=True):
            if row["id"] is None:
                raise BackendError(f"enqueue could not place job {job.id}")
            results.append(
                EnqueueResult(str(row["id"]), str(row["run_id"]), deduped=not row["inserted"])
            )
        return results

    async def _enqueue_once(self, jobs: Sequence[NewJob]) -> list[EnqueueResult | None]:
        try:
            rows = await self._x.lanes.fetch(self._x.sql["enqueue"], *self._enqueue(jobs).bind())
        except asyncpg.UniqueViolationError:
            # A third publisher raced one id inside this insert's own speculative window (the
            # fast path's id race is seen here, committed): the bound of two inserts is kept.
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
        params = ClaimParams(self._x.now(), options, LAPSED_ON_FINAL_ATTEMPT)
        rows = await self._x.fetch("claim", params)
        jobs = tuple(claimed_job(row, options.worker_id) for row in rows if not row["buried"])
        buried = tuple(buried_job(row) for row in rows if row["buried"])
        return ClaimResult(jobs=jobs, buried=buried)

    async def ack(self, claim: Claim) -> bool:
        return await self._x.landed("ack", AckParams(self._x.now(), claim))

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        rows = await self._x.fetch("ack_many", AckManyParams(self._x.now(), claims))
        landed = {(str(row["id"]), row["claims"]) for row in rows}
        return [(claim.job_id, claim.claims) in landed for claim in claims]

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        return await self._x.landed("nack", NackParams(self._x.now(), claim, nack))

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        params = HeartbeatParams(self._x.now(), claim, lease_ms)
        return await self._x.execute("heartbeat", params) == 1

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        params = ProgressParams(self._x.now(), claim, progress)
        return await self._x.execute("record_progress", params) == 1

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        if not is_uuid(job_id):
            return JobMove("missing")
        params = CancelParams(self._x.now(), job_id, cancel_error(reason))
        row = await self._x.fetchrow("cancel", params)
        if row is not None:
            await self._cascade(params)
            return JobMove("done", job_record(row))
        record = await self.get(job_id)
        if record is None:
            return JobMove("missing")
        return JobMove("finished", state=record.state)

    async def _cascade(self, cancel: CancelParams) -> None:
        """The cancel's cascade again, each pass with a snapshot of its own, until one moves
        nothing: a spawn page that committed while the cancel waited for the parent's row (it
        holds it for share) is invisible to the cancel's own statement, and found by the next."""
        while True:
            row = await self._x.fetchrow("cancel_descendants", cancel)
            if row is None or not row["moved"]:
                return

    async def requeue(self, job_id: str) -> JobMove:
        if not is_uuid(job_id):
            return JobMove("missing")
        row = await self._x.fetchrow("requeue", RequeueParams(self._x.now(), job_id))
        if row is not None:
            return JobMove("done", job_record(row))
        record = await self.get(job_id)
        if record is None:
            return JobMove("missing")
        if record.live:
            return JobMove("live", state=record.state)
        holder = await self._x.fetchrow("live_holder", One(job_id))
        return JobMove("duplicate", holder=None if holder is None else str(holder["id"]))

    async def get(self, job_id: str) -> JobRecord | None:
        if not is_uuid(job_id):
            return None
        row = await self._x.fetchrow("get_job", One(job_id))
        return None if row is None else job_record(row)


def cancel_error(reason: str | None) -> str:
    """The `last_error` a cancel writes."""
    return f"cancelled: {reason}" if reason else "cancelled"


def is_uuid(value: str) -> bool:
    """Whether `value` can name a row (ids are uuids here: anything else names no job)."""
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _due_queues(jobs: Sequence[NewJob], now: int | None) -> list[str]:
    """The queues of `jobs` that get a row due at `now` (the driver's clock, else the wall's)."""
    due_by = now if now is not None else time.time_ns() // 1_000_000
    return sorted({j.queue for j in jobs if j.run_at_ms is None or j.run_at_ms <= due_by})


def _namespace(job: NewJob) -> tuple[str, str, str]:
    return (job.name, job.tenant_id or "", job.idempotency_key)
