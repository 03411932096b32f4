"""The SQLite job driver: each operation one transaction on this process's writer thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import (
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
from xjobs_sqlite import moves, settle
from xjobs_sqlite.children_endings import take_woken
from xjobs_sqlite.claim import claim_pass
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.enqueue import enqueue_rows
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.rows import job_record
from xjobs_sqlite.sql import sql

T = TypeVar("T")


class SqliteJobDriver:
    """Jobs in the file's `jobs` table; the write lock orders claims, settles are fenced on the claim."""

    def __init__(
        self, executor: Executor, wake: WakeSource, settled: Callable[[str], None] | None = None
    ) -> None:
        self._x = executor
        self._wake = wake
        # Told each job this process finished (a result waiter of this process wakes at once).
        self._settled = settled or (lambda _job_id: None)

    async def _ending(self, work: Callable[[Connection], T]) -> T:
        """A write that may end jobs, then the wake of each queue where it made a parked parent
        due (the last ending of its children resolved the group)."""
        out, woken = await self._x.write(lambda conn: (work(conn), take_woken()))
        for queue in sorted(woken):
            self._wake.emit(queue)
        return out

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """Insert each job unless its id or a live job of its namespace answers it; one transaction."""
        if not jobs:
            return []
        now = self._x.now()
        done = await self._x.write(lambda conn: enqueue_rows(conn, jobs, now))
        # The writer's own commits do not move its data_version: this process wakes its own.
        for queue in sorted(done.due_queues):
            self._wake.emit(queue)
        return done.results

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        """Bury exhausted lapsed leases, then claim in one update (the pass in one transaction)."""
        assert_claim_queues(options)
        now = self._x.now()
        result = await self._ending(lambda conn: claim_pass(conn, options, now))
        for job in result.buried:
            self._settled(job.id)
        return result

    async def ack(self, claim: Claim) -> bool:
        """Settle `completed`; whether the fence held."""
        return await self.complete(claim, None)

    async def complete(self, claim: Claim, result: str | None) -> bool:
        """Settle `completed` storing the body's result (JSON text); whether the fence held."""
        now = self._x.now()
        landed = await self._ending(lambda conn: settle.complete(conn, claim, now, result))
        if landed:
            self._settled(claim.job_id)
        return landed

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        """Settle many runs `completed` in one transaction, each fenced on its own claim."""
        if not claims:
            return []
        now = self._x.now()
        landed = await self._ending(lambda conn: settle.complete_many(conn, claims, now))
        for claim, ok in zip(claims, landed, strict=True):
            if ok:
                self._settled(claim.job_id)
        return landed

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        """Store the settle room's `Nack`; whether the fence held."""
        now = self._x.now()
        landed = await self._ending(lambda conn: settle.nack(conn, claim, nack, now))
        if landed and nack.terminal:
            self._settled(claim.job_id)
        return landed

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        """Extend the lease by `lease_ms` from now; whether the fence held."""
        now = self._x.now()
        return await self._x.write(lambda conn: settle.heartbeat(conn, claim, lease_ms, now))

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        """Store the run's progress; whether the fence held."""
        now = self._x.now()
        return await self._x.write(lambda conn: settle.record_progress(conn, claim, progress, now))

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        """Cancel a live job; `finished` or `missing` otherwise."""
        now = self._x.now()
        move = await self._ending(lambda conn: moves.cancel(conn, job_id, reason, now))
        if move.status == "done":
            self._settled(job_id)
        return move

    async def requeue(self, job_id: str) -> JobMove:
        """Put a finished job back to `ready`; `missing`, `live` or `duplicate` otherwise."""
        now = self._x.now()
        move = await self._x.write(lambda conn: moves.requeue(conn, job_id, now))
        if move.record is not None:
            self._wake.emit(move.record.queue)
        return move

    async def get(self, job_id: str) -> JobRecord | None:
        """One job, read on the reader, or `None`."""
        row = await self._x.read(
            lambda conn: conn.execute(sql("get_job"), {"id": job_id}).fetchone()
        )
        return None if row is None else job_record(row)
