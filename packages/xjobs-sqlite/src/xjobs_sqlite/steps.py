"""The step store: a run's memoized steps in `steps`, each write fenced on the job's claim."""

from __future__ import annotations

from xjobs.contract.driver import Claim
from xjobs.contract.stores import StepRecord
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


class SqliteStepStore:
    """`StepStore` over `steps`: a `done` record is never overwritten."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        """Every recorded step of a run, by position (one read)."""
        rows = await self._x.read(
            lambda conn: conn.execute(sql("step_list"), {"run_id": run_id}).fetchall()
        )
        return [StepRecord(*row) for row in rows]

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        """Write a step fenced on the claim; whether it landed."""
        params = {
            "run_id": record.run_id,
            "name": record.name,
            "status": record.status,
            "result": record.result,
            "error": record.error,
            "position": record.position,
            "created_at_ms": record.created_at_ms,
            "job_id": claim.job_id,
            "worker_id": claim.worker_id,
            "claims": claim.claims,
        }
        landed = await self._x.write(lambda conn: conn.execute(sql("step_put"), params).rowcount)
        return landed == 1
