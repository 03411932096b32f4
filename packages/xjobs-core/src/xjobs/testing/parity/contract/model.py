"""The reference model of the job-driver contract (semantics.md, "Claims, leases and settlement"):
one queue's jobs as plain records, moved by the rules every driver must follow."""

from __future__ import annotations

from dataclasses import dataclass, field

from xjobs.contract.driver import LIVE_STATES, Claim, JobState, Nack, NewJob


@dataclass
class ModelJob:
    """What the contract says one job is now."""

    id: str
    key: str
    priority: int
    max_attempts: int
    dead_letter: bool
    run_at_ms: int
    state: JobState = "ready"
    attempt: int = 0
    claims: int = 0
    claimed_by: str | None = None
    lease_until_ms: int | None = None

    @property
    def order(self) -> tuple[int, int]:
        """Claim order up to the id (drivers may break a tie by their own id collation)."""
        return (self.priority, self.run_at_ms)

    def claimable(self, now: int) -> bool:
        """Due and waiting, or running on a lapsed lease with attempts left."""
        if self.state in ("ready", "waiting"):
            return self.run_at_ms <= now
        return self.lapsed(now) and self.attempt < self.max_attempts

    def lapsed(self, now: int) -> bool:
        """Running on a lease that ran out."""
        return self.state == "running" and (self.lease_until_ms or 0) <= now


@dataclass
class ContractModel:
    """Every job one state machine run enqueued, keyed by id."""

    jobs: dict[str, ModelJob] = field(default_factory=dict)

    def live_holder(self, key: str) -> ModelJob | None:
        """The live job of an idempotency key (one name and tenant per run), if any."""
        return next(
            (j for j in self.jobs.values() if j.key == key and j.state in LIVE_STATES), None
        )

    def enqueue(self, new: NewJob, now: int) -> tuple[str, bool]:
        """The id the enqueue must answer and whether it is deduped."""
        holder = self.live_holder(new.idempotency_key)
        if holder is not None:
            return holder.id, True
        run_at = now if new.run_at_ms is None else new.run_at_ms
        self.jobs[new.id] = ModelJob(
            new.id, new.idempotency_key, new.priority, new.max_attempts, new.dead_letter, run_at
        )
        return new.id, False

    def bury(self, now: int) -> set[str]:
        """A claim buries every lapsed lease on its final attempt (`dead`, or `failed`)."""
        buried = {j.id for j in self.jobs.values() if j.lapsed(now) and j.attempt >= j.max_attempts}
        for job_id in buried:
            job = self.jobs[job_id]
            job.state = "dead" if job.dead_letter else "failed"
            job.lease_until_ms = None
        return buried

    def candidates(self, now: int) -> list[ModelJob]:
        """The jobs a claim may take now, in claim order."""
        return sorted((j for j in self.jobs.values() if j.claimable(now)), key=lambda j: j.order)

    def claimed(self, job_id: str, worker_id: str, now: int, lease_ms: int) -> ModelJob:
        """A claim took `job_id`: running, one more attempt and claim, leased to `worker_id`."""
        job = self.jobs[job_id]
        job.state = "running"
        job.attempt += 1
        job.claims += 1
        job.claimed_by = worker_id
        job.lease_until_ms = now + lease_ms
        return job

    def holds(self, claim: Claim) -> bool:
        """The fence: the job is running under exactly this worker and claim number."""
        job = self.jobs.get(claim.job_id)
        return (
            job is not None
            and job.state == "running"
            and job.claimed_by == claim.worker_id
            and job.claims == claim.claims
        )

    def heartbeat(self, job_id: str, now: int, lease_ms: int) -> None:
        """A landed heartbeat extends the lease from now."""
        self.jobs[job_id].lease_until_ms = now + lease_ms

    def ack(self, job_id: str) -> None:
        """A landed ack completes the job."""
        self.finish(job_id, "completed")

    def nack(self, job_id: str, nack: Nack, now: int) -> None:
        """A landed nack stores the settle room's decision as is."""
        job = self.jobs[job_id]
        if not nack.counts_as_attempt:
            job.attempt = max(job.attempt - 1, 0)
        if nack.terminal:
            self.finish(job_id, nack.state)
            return
        job.state = nack.state
        job.lease_until_ms = None
        job.run_at_ms = now if nack.run_at_ms is None else nack.run_at_ms

    def cancel(self, job_id: str) -> str:
        """The status `cancel` must answer; a live job is cancelled."""
        job = self.jobs.get(job_id)
        if job is None:
            return "missing"
        if job.state not in LIVE_STATES:
            return "finished"
        self.finish(job_id, "cancelled")
        return "done"

    def requeue(self, job_id: str, now: int) -> str:
        """The status `requeue` must answer; a finished job with a free key is ready, attempts reset."""
        job = self.jobs.get(job_id)
        if job is None:
            return "missing"
        if job.state in LIVE_STATES:
            return "live"
        if self.live_holder(job.key) is not None:
            return "duplicate"
        job.state = "ready"
        job.attempt = 0
        job.claimed_by = None
        job.lease_until_ms = None
        job.run_at_ms = now
        return "done"

    def finish(self, job_id: str, state: JobState) -> None:
        """A job reaches a finished state and lets go of its lease."""
        job = self.jobs[job_id]
        job.state = state
        job.lease_until_ms = None

    def counts(self, now: int) -> dict[str, int]:
        """The queue counts an operator must read (`QueueCounts`), by field."""
        counts = dict.fromkeys(("ready", "scheduled", "running", "waiting", "dead", "failed"), 0)
        for job in self.jobs.values():
            if job.state == "ready":
                counts["ready" if job.run_at_ms <= now else "scheduled"] += 1
            elif job.state in counts:
                counts[job.state] += 1
        return counts
