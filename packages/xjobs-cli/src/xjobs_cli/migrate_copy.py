"""`xjobs migrate`'s job copy: every job of one backend into another through the contract's own verbs.

No protocol writes a job in a state of its choosing, so each page goes as a worker would take it:
enqueued on the target with its id and run id kept, claimed there by the copy's own worker id,
its step records and progress written under that claim, then settled as the source has it — a
completed job with its result, a dead or failed one with its last error, a cancelled one
cancelled, a live one handed back to `ready` uncounted (due when it was due; a running or waiting
one at once: its steps replay and a wait parks again). A job whose id the target already holds is
left alone, so a copy cut short is finished by running it again with `--merge`.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xjobs.contract.backend import Backend
from xjobs.contract.driver import (
    LIVE_STATES,
    ClaimedJob,
    ClaimOptions,
    JobRecord,
    JobState,
    Nack,
    NewJob,
)
from xjobs.contract.introspection import JobFilter
from xjobs.errors import CapabilityMissingError
from xjobs_cli.errors import TargetInvalidError

PAGE = 200
# The copy's claims are settled within the page; a copy killed mid-page leaves them to lapse.
CLAIM_LEASE_MS = 300_000
FINISHED: tuple[JobState, ...] = ("completed", "failed", "dead", "cancelled")
LIVE: tuple[JobState, ...] = ("ready", "running", "waiting")


@dataclass
class CopyCounts:
    """What the copy did so far: jobs by the state they arrived in, and what came with them."""

    jobs: Counter[str] = field(default_factory=Counter)
    present: int = 0
    steps: int = 0
    results: int = 0
    not_copied: dict[str, str] = field(default_factory=dict)

    @property
    def copied(self) -> int:
        """How many jobs the copy wrote."""
        return sum(self.jobs.values())


def new_job(record: JobRecord) -> NewJob:
    """The source job as an enqueue of the same id, run id, namespace and input, due at once."""
    return NewJob(
        id=record.id,
        run_id=record.run_id,
        name=record.name,
        queue=record.queue,
        tenant_id=record.tenant_id,
        idempotency_key=record.idempotency_key,
        payload=record.payload,
        priority=record.priority,
        run_at_ms=None,
        max_attempts=record.max_attempts,
        dead_letter=record.dead_letter,
        enqueued_by=record.enqueued_by,
        traceparent=record.traceparent,
    )


def arrives_as(state: str) -> str:
    """The state a source job has on the target: a running or waiting one is `ready` again."""
    return "ready" if state in LIVE_STATES else state


class JobCopy:
    """Copies the jobs of `source` into `target`, a page at a time, telling `on_page` after each."""

    def __init__(
        self,
        source: Backend,
        target: Backend,
        *,
        on_page: Callable[[CopyCounts], None] = lambda counts: None,
    ) -> None:
        self.source = source
        self.target = target
        self.counts = CopyCounts()
        self._on_page = on_page
        self._worker_id = f"xjobs-migrate-{secrets.token_hex(4)}"

    async def run(self, *, live_only: bool) -> CopyCounts:
        """Copy the finished jobs (unless `live_only`), then the live ones."""
        listing = self.source.introspection
        if listing is None:
            raise CapabilityMissingError(
                f"the {self.source.name} backend lists no jobs (no introspection): nothing to copy from"
            )
        for states in (LIVE,) if live_only else (FINISHED, LIVE):
            after = None
            while True:
                page = await listing.list_jobs(JobFilter(states=states), limit=PAGE, after=after)
                if not page:
                    break
                after = page[-1].position
                await self._copy_page([s.id for s in page])
                self._on_page(self.counts)
                if len(page) < PAGE:
                    break
        return self.counts

    async def _copy_page(self, ids: Sequence[str]) -> None:
        pending: list[JobRecord] = []
        for job_id in ids:
            record = await self.source.jobs.get(job_id)
            if record is None:
                continue  # removed since it was listed
            if await self.target.jobs.get(job_id) is not None:
                self.counts.present += 1
            else:
                pending.append(record)
        while pending:
            deferred = await self._round(pending)
            if len(deferred) == len(pending):
                for record in deferred:
                    self.counts.not_copied[record.id] = (
                        "a live job on the target holds its idempotency namespace"
                    )
                return
            pending = deferred

    async def _round(self, records: Sequence[JobRecord]) -> list[JobRecord]:
        """Enqueue, claim and settle `records`; answers those a live job's namespace deferred."""
        answers = await self.target.jobs.enqueue([new_job(r) for r in records])
        ours: dict[str, JobRecord] = {}
        deferred: list[JobRecord] = []
        for record, answer in zip(records, answers, strict=True):
            if answer.deduped or answer.job_id != record.id:
                deferred.append(record)
            else:
                ours[record.id] = record
        queues = sorted({r.queue for r in ours.values()})
        for queue in queues:
            await self._claim_and_settle(queue, {i: r for i, r in ours.items() if r.queue == queue})
        return deferred

    async def _claim_and_settle(self, queue: str, ours: dict[str, JobRecord]) -> None:
        wanted = set(ours)
        foreign: list[ClaimedJob] = []
        try:
            while wanted:
                claimed = await self.target.jobs.claim(
                    ClaimOptions(
                        worker_id=self._worker_id,
                        queues={queue: len(wanted)},
                        lease_ms=CLAIM_LEASE_MS,
                        limit=len(wanted),
                    )
                )
                if not claimed.jobs:
                    raise TargetInvalidError(
                        f"{len(wanted)} copied jobs of queue {queue!r} could not be claimed on the "
                        "target to be settled as the source has them: is the queue or a job name "
                        "paused there, or a worker running against it? Resume it or stop the "
                        "worker, then run the copy again with --merge"
                    )
                for job in claimed.jobs:
                    if job.id in wanted:
                        wanted.discard(job.id)
                        await self._settle(ours[job.id], job)
                    else:
                        foreign.append(job)
        finally:
            for job in foreign:  # the target's own due jobs, handed back as they were
                await self.target.jobs.nack(
                    job.claim,
                    Nack("ready", "handed-back", run_at_ms=job.due_at_ms, counts_as_attempt=False),
                )

    async def _settle(self, record: JobRecord, job: ClaimedJob) -> None:
        claim = job.claim
        if self.source.steps is not None and self.target.steps is not None:
            for step in await self.source.steps.list(record.run_id, record.queue):
                if await self.target.steps.put(claim, step):
                    self.counts.steps += 1
        if record.progress is not None:
            await self.target.jobs.record_progress(claim, record.progress)
        if record.state == "completed":
            await self._complete(record, job)
        elif record.state == "dead":
            dead = Nack("dead", "dead-lettered", record.run_at_ms, record.last_error)
            await self.target.jobs.nack(claim, dead)
        elif record.state == "failed":
            failed = Nack("failed", "dropped", record.run_at_ms, record.last_error)
            await self.target.jobs.nack(claim, failed)
        else:
            due = record.run_at_ms if record.state == "ready" else None
            back = Nack("ready", "handed-back", run_at_ms=due, counts_as_attempt=False)
            await self.target.jobs.nack(claim, back)
            if record.state == "cancelled":
                await self.target.jobs.cancel(record.id, record.last_error)
        self.counts.jobs[arrives_as(record.state)] += 1

    async def _complete(self, record: JobRecord, job: ClaimedJob) -> None:
        stored = None if self.source.results is None else await self.source.results.read(record.id)
        if stored is not None and stored.result is not None and self.target.results is not None:
            await self.target.results.complete(job.claim, stored.result)
            self.counts.results += 1
        else:
            await self.target.jobs.ack(job.claim)
