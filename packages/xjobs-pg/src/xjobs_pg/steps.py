"""The Postgres step store: `<schema>.steps`, one row per step of a run, writes fenced on the claim."""

from __future__ import annotations

from typing import cast

from xjobs.contract.driver import Claim
from xjobs.contract.stores import StepRecord, StepStatus
from xjobs_pg.executor import Executor
from xjobs_pg.params import One
from xjobs_pg.store_params import StepPutParams


class PostgresStepStore:
    """Step records keyed by (run id, name); `done` is never overwritten."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        rows = await self._x.fetch("step_list", One(run_id))
        return [
            StepRecord(
                run_id=str(row["run_id"]),
                name=row["name"],
                status=cast(StepStatus, row["status"]),
                result=row["result"],
                error=row["error"],
                position=row["position"],
                created_at_ms=row["created_at_ms"],
            )
            for row in rows
        ]

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        landed = await self._x.fetchrow("step_put", StepPutParams(claim, record))
        return landed is not None
