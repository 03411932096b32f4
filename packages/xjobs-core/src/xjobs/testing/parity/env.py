"""What a parity scenario is handed: the backend under test, its manual clock, and row builders."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from xjobs.app import App
from xjobs.backend import Backend
from xjobs.clock import ManualClock
from xjobs.driver import ClaimedJob, ClaimOptions, ClaimResult, NewJob
from xjobs.ids import new_id
from xjobs.plugins import BackendFactory


@dataclass
class ParityEnv:
    """One scenario's world: a fresh isolated backend on a manual clock."""

    factory: BackendFactory
    clock: ManualClock = field(default_factory=ManualClock)
    _backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        assert self._backend is not None, "the backend opens when the scenario runs"
        return self._backend

    def app(self, jobs: Iterable[object] = (), **options: Any) -> App:
        """An `App` over this scenario's backend and clock (it does not own the backend)."""
        return App(self.backend, jobs=jobs, clock=self.clock, **options)

    def new_job(self, **overrides: Any) -> NewJob:
        """A row to enqueue straight through the driver; every column may be overridden."""
        values: dict[str, Any] = {
            "id": new_id(),
            "run_id": new_id(),
            "name": "parity_job",
            "queue": "parity",
            "tenant_id": None,
            "idempotency_key": new_id(),
            "payload": '{"n": 1}',
            "priority": 0,
            "run_at_ms": None,
            "max_attempts": 3,
            "dead_letter": True,
            "enqueued_by": None,
            "traceparent": None,
        }
        values.update(overrides)
        return NewJob(**values)

    async def claim(
        self,
        queues: dict[str, int] | None = None,
        *,
        worker_id: str = "worker-a",
        lease_ms: int = 30_000,
    ) -> ClaimResult:
        """One claim pass through the driver (default: up to 10 from queue `parity`)."""
        options = ClaimOptions(worker_id=worker_id, queues=queues or {"parity": 10}, lease_ms=lease_ms)
        return await self.backend.jobs.claim(options)

    async def claim_one(self, queue: str = "parity", *, worker_id: str = "worker-a", lease_ms: int = 30_000) -> ClaimedJob:
        """Claim exactly one job from `queue`, failing the scenario if there is none."""
        result = await self.claim({queue: 1}, worker_id=worker_id, lease_ms=lease_ms)
        assert len(result.jobs) == 1, f"expected one claimable job in {queue!r}, got {len(result.jobs)}"
        return result.jobs[0]
