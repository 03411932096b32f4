"""The memory step store: records per run, writes fenced on the job's claim through the driver."""

from __future__ import annotations

from xjobs.contract.driver import Claim
from xjobs.contract.stores import StepRecord
from xjobs.memory.driver import MemoryJobDriver


class MemoryStepStore:
    """Step records keyed by (run id, name); `done` is never overwritten."""

    def __init__(self, jobs: MemoryJobDriver) -> None:
        self._jobs = jobs
        self._runs: dict[str, dict[str, StepRecord]] = {}
        jobs.on_remove(self._forget)

    def _forget(self, run_id: str) -> None:
        """A removed job's steps go with it."""
        self._runs.pop(run_id, None)

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        records = self._runs.get(run_id, {})
        return sorted(records.values(), key=lambda r: (r.position, r.name))

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        if not self._jobs.holds(claim):
            return False
        records = self._runs.setdefault(record.run_id, {})
        existing = records.get(record.name)
        if existing is not None and existing.status == "done":
            return False
        records[record.name] = record
        return True
