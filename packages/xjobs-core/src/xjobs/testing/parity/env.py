"""What a parity scenario is handed: the backend under test, its manual clock, and row builders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xjobs.app import App
from xjobs.clock import ManualClock
from xjobs.contract.driver import (
    ClaimedJob,
    ClaimOptions,
    ClaimResult,
    JobRecord,
    JobState,
    NewJob,
)
from xjobs.operate.moves import moved
from xjobs.run.settle import ending, parking
from xjobs.testing.rows import new_job

if TYPE_CHECKING:
    from collections.abc import Iterable

    from xjobs.contract.backend import Backend
    from xjobs.contract.factory import BackendFactory
    from xjobs.contract.introspection import JobIntrospection
    from xjobs.contract.stores import SlotStore, WorkerRegistry

PARKED_FOR_MS = 60_000


@dataclass
class ParityEnv:
    """One scenario's world: a fresh isolated backend on a manual clock."""

    factory: BackendFactory
    clock: ManualClock = field(default_factory=ManualClock)
    _backend: Backend | None = None

    @property
    def backend(self) -> Backend:
        """The backend under test, opened fresh when the scenario runs."""
        assert self._backend is not None, "the backend opens when the scenario runs"
        return self._backend

    @property
    def workers(self) -> WorkerRegistry:
        """The worker registry (mark the scenario `@pytest.mark.requires("workers")`)."""
        workers = self.backend.workers
        assert workers is not None, 'mark the scenario @pytest.mark.requires("workers")'
        return workers

    @property
    def slots(self) -> SlotStore:
        """The fleet slot store (mark the scenario `@pytest.mark.requires("slots")`)."""
        slots = self.backend.slots
        assert slots is not None, 'mark the scenario @pytest.mark.requires("slots")'
        return slots

    @property
    def introspection(self) -> JobIntrospection:
        """The operator surface (mark the scenario `@pytest.mark.requires("introspection")`)."""
        ops = self.backend.introspection
        assert ops is not None, 'mark the scenario @pytest.mark.requires("introspection")'
        return ops

    def app(self, jobs: Iterable[object] = (), **options: Any) -> App:
        """An `App` over this scenario's backend and clock (it does not own the backend).

        Retention is off unless the scenario passes `retention=`: a scenario pins its own jobs
        and tasks, and the default purge task would fire beside them.
        """
        return App(self.backend, jobs=jobs, clock=self.clock, **{"retention": None, **options})

    def new_job(self, **overrides: Any) -> NewJob:
        """A row to enqueue straight through the driver; every column may be overridden."""
        return new_job(**{"name": "parity_job", "queue": "parity", **overrides})

    async def enqueue(self, **overrides: Any) -> NewJob:
        """Enqueue one new row (failing the scenario if it was deduped) and answer it."""
        job = self.new_job(**overrides)
        (result,) = await self.backend.jobs.enqueue([job])
        assert not result.deduped, f"expected a new job, the enqueue was deduped to {result.job_id}"
        return job

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRecord:
        """`jobs.cancel` read back as the App reads it: the record, or the refusal its answer names."""
        return moved("cancel", job_id, await self.backend.jobs.cancel(job_id, reason))

    async def requeue(self, job_id: str) -> JobRecord:
        """`jobs.requeue` read back as the App reads it: the record, or the refusal its answer names."""
        return moved("requeue", job_id, await self.backend.jobs.requeue(job_id))

    async def record(self, job_id: str) -> JobRecord:
        """The stored job, failing the scenario if there is none."""
        record = await self.backend.jobs.get(job_id)
        assert record is not None, f"no job has id {job_id!r}"
        return record

    async def claim(
        self,
        queues: dict[str, int] | None = None,
        *,
        worker_id: str = "worker-a",
        lease_ms: int = 30_000,
        limit: int | None = None,
    ) -> ClaimResult:
        """One claim pass through the driver (default: up to 10 from queue `parity`)."""
        options = ClaimOptions(
            worker_id=worker_id,
            queues=queues if queues is not None else {"parity": 10},
            lease_ms=lease_ms,
            limit=limit,
        )
        return await self.backend.jobs.claim(options)

    async def claim_one(
        self, queue: str = "parity", *, worker_id: str = "worker-a", lease_ms: int = 30_000
    ) -> ClaimedJob:
        """Claim exactly one job from `queue`, failing the scenario if there is none."""
        result = await self.claim({queue: 1}, worker_id=worker_id, lease_ms=lease_ms)
        assert len(result.jobs) == 1, (
            f"expected one claimable job in {queue!r}, got {len(result.jobs)}"
        )
        return result.jobs[0]

    async def job_in_state(self, state: JobState, **overrides: Any) -> NewJob:
        """Enqueue a job and move it to `state` through the contract; answer the enqueued row.

        A running, waiting or finished job is claimed from its queue first, so build it before
        enqueuing other ready jobs there. Waiting is a park `PARKED_FOR_MS` ahead, uncounted.
        """
        job = await self.enqueue(**overrides)
        if state == "ready":
            return job
        if state == "cancelled":
            await self.backend.jobs.cancel(job.id)
            return job
        claimed = await self.claim_one(job.queue)
        assert claimed.id == job.id, f"claimed {claimed.id}, not the job being built ({job.id})"
        jobs = self.backend.jobs
        now = self.clock.now_ms()
        landed = True
        if state == "waiting":
            park = parking(now + PARKED_FOR_MS)
            landed = await jobs.nack(claimed.claim, park)
        elif state == "completed":
            landed = await jobs.ack(claimed.claim)
        elif state == "failed":
            landed = await jobs.nack(claimed.claim, ending(False, "failed for good"))
        elif state == "dead":
            landed = await jobs.nack(claimed.claim, ending(True, "dead-lettered"))
        assert landed, f"the settle to {state!r} did not land"
        return job
