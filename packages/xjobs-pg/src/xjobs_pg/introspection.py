"""`PostgresIntrospection`: the operator surface over `<schema>.jobs`, its attempt errors, counters and pauses.

Every read goes through `jobs_listed` one queue and one state at a time (`sql/listing.sql`), every
bulk verb moves one bounded batch in one statement (`sql/bulk.sql`), and the counters and pauses
are rows the settles and the claim write and read in their own statements (`sql/ledger.sql`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xjobs.contract.driver import FINISHED_STATES, JOB_STATES, LIVE_STATES, BulkResult, JobMove
from xjobs.contract.introspection import (
    COUNT_CAP,
    AttemptError,
    CounterBucket,
    CounterTier,
    JobFilter,
    JobPosition,
    JobSummary,
    Pause,
    PauseKind,
    QueueCounts,
    only_states,
)
from xjobs.errors import JobPageInvalidError
from xjobs_pg.driver import PostgresJobDriver, cancel_error, is_uuid
from xjobs_pg.executor import Executor
from xjobs_pg.operator_params import (
    BulkParams,
    CancelManyParams,
    CounterParams,
    ListParams,
    PauseRowParams,
    PromoteParams,
    QueueCountsParams,
    ResumeParams,
    RollupParams,
    WakingBulkParams,
)
from xjobs_pg.params import NO_PARAMS, One, Params
from xjobs_pg.rows import attempt_error, counter_bucket, job_record, job_summary
from xjobs_pg.wake_slots import WakeSlots


class PostgresIntrospection:
    """`JobIntrospection` on Postgres: bounded reads, one statement a verb, pauses the claim reads."""

    def __init__(self, executor: Executor, jobs: PostgresJobDriver, wake: WakeSlots) -> None:
        self._x = executor
        self._jobs = jobs
        self._channel = wake.channel

    # -- reads ------------------------------------------------------------------------------------

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        if after is not None and not is_uuid(after.id):
            raise JobPageInvalidError(
                "the cursor names no Postgres job; pass the one a page answered"
            )
        states = where.states or JOB_STATES
        rows = await self._x.fetch("list_jobs", ListParams(where, states, after, limit))
        return [job_summary(row) for row in rows]

    async def errors(self, job_id: str) -> list[AttemptError]:
        if not is_uuid(job_id):
            return []
        return [attempt_error(row) for row in await self._x.fetch("job_errors", One(job_id))]

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        params = QueueCountsParams(now_ms, COUNT_CAP)
        rows = await self._x.fetch_by_index("queue_counts", params)
        return [
            QueueCounts(
                queue=row["queue"],
                ready=row["ready"],
                scheduled=row["scheduled"],
                running=row["running"],
                waiting=row["waiting"],
                dead=row["dead"],
                failed=row["failed"],
                oldest_ready_ms=row["oldest_ready_ms"],
                paused=row["paused"],
            )
            for row in rows
        ]

    # -- counters ---------------------------------------------------------------------------------

    async def counters(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        rows = await self._x.fetch("counter_buckets", CounterParams(tier, since_ms))
        return [counter_bucket(tier, row) for row in rows]

    async def rollup_counters(self, now_ms: int) -> int:
        row = await self._x.fetchrow("rollup_counters", RollupParams(now_ms))
        return 0 if row is None else int(row["folded"])

    # -- pauses -----------------------------------------------------------------------------------

    async def pause(self, kind: PauseKind, name: str) -> bool:
        params = PauseRowParams(self._x.now(), kind, name)
        return await self._x.fetchrow("pause", params) is not None

    async def resume(self, kind: PauseKind, name: str) -> bool:
        row = await self._x.fetchrow("resume", ResumeParams(kind, name, self._channel))
        return row is not None and row["resumed"] == 1

    async def pauses(self) -> list[Pause]:
        rows = await self._x.fetch("pause_list", NO_PARAMS)
        return [Pause(cast(PauseKind, r["kind"]), r["name"], r["paused_at_ms"]) for r in rows]

    # -- one job ----------------------------------------------------------------------------------

    async def promote(self, job_id: str) -> JobMove:
        if not is_uuid(job_id):
            return JobMove("missing")
        row = await self._x.fetchrow("promote", PromoteParams(self._x.now(), job_id, self._channel))
        if row is not None:
            return JobMove("done", job_record(row))
        return await self._refusal(job_id)

    async def remove(self, job_id: str) -> JobMove:
        if not is_uuid(job_id):
            return JobMove("missing")
        # A job that finished between the delete and the read is deleted by the second try.
        for _ in range(2):
            row = await self._x.fetchrow("remove", One(job_id))
            if row is not None:
                return JobMove("done", job_record(row))
            move = await self._refusal(job_id)
            if move.status != "finished":
                return move
        return move

    async def _refusal(self, job_id: str) -> JobMove:
        """Why a move of one job found nothing to move: missing, finished or live."""
        record = await self._jobs.get(job_id)
        if record is None:
            return JobMove("missing")
        if record.state in FINISHED_STATES:
            return JobMove("finished", state=record.state)
        return JobMove("live", state=record.state)

    # -- bulk verbs -------------------------------------------------------------------------------

    def _bulk(self, where: JobFilter, states: Sequence[str], limit: int) -> BulkParams:
        return BulkParams(where, states, self._x.now(), limit, COUNT_CAP)

    async def _moved(self, name: str, params: Params) -> BulkResult:
        (row,) = await self._x.fetch_by_index(name, params)
        return BulkResult(moved=int(row["moved"]), remaining=int(row["remaining"]))

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        states = only_states(where, sorted(LIVE_STATES))
        if not states:
            return BulkResult(0, 0)
        params = CancelManyParams(self._bulk(where, states, limit), cancel_error(reason))
        return await self._moved("cancel_many", params)

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        if where.states and "ready" not in where.states:
            return BulkResult(0, 0)
        params = WakingBulkParams(self._bulk(where, ("ready",), limit), self._channel)
        return await self._moved("promote_many", params)

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        if not states:
            return BulkResult(0, 0)
        return await self._moved("remove_many", self._bulk(where, states, limit))

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        if not states:
            return BulkResult(0, 0)
        params = WakingBulkParams(self._bulk(where, states, limit), self._channel)
        return await self._moved("retry_many", params)
