"""One claimed job, wired: admission, heartbeat and fleet-slot renewal, `execute_job`, and the slot's release."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT, BuriedJob, ClaimedJob, Nack, Outcome
from xjobs.contract.stores import SlotHolder
from xjobs.declare.job import JobHandle
from xjobs.declare.registry import Registry
from xjobs.errors import JobNotRegisteredError
from xjobs.run.ack_batch import AckBatcher
from xjobs.run.admit import SHED_DELAY_MS, admit
from xjobs.run.execute import Execution, execute_job
from xjobs.run.heartbeat import LeaseKeeper
from xjobs.run.settled import Settled, SettledHook, announce_settled
from xjobs.run.signal import RunSignal

log = logging.getLogger("xjobs.roles.worker")


@dataclass(frozen=True, slots=True)
class RunWiring:
    """What every run of one worker shares: the stores, the registry, the clock, the hooks, the lease."""

    backend: Backend
    registry: Registry
    clock: Clock
    hooks: tuple[SettledHook, ...]
    lease_ms: int
    heartbeat_ms: int
    acks: AckBatcher

    def hooks_for(self, handle: JobHandle[Any] | None) -> tuple[SettledHook, ...]:
        if handle is not None and handle.on_settled is not None:
            return (*self.hooks, handle.on_settled)
        return self.hooks


def tenant_of(handle: JobHandle[Any] | None, payload: str) -> str | None:
    """The run's tenant for an announcement, best effort (a row that no longer decodes has none)."""
    if handle is None:
        return None
    try:
        return handle.tenant_for(handle.input_model.model_validate_json(payload))
    except Exception:
        return None


async def run_claimed(wiring: RunWiring, job: ClaimedJob, signal: RunSignal) -> Execution:
    """Admit, run and settle one claimed job; the fleet slot is taken inside the `try`, released awaited."""
    handle = wiring.registry.jobs.get(job.name)
    if handle is None:
        return await _settle_unknown(wiring, job)
    leases = wiring.backend.leases
    keeper = LeaseKeeper(
        wiring.backend.jobs,
        job.claim,
        lease_ms=wiring.lease_ms,
        every_ms=wiring.heartbeat_ms,
        signal=signal,
    )
    slot: tuple[str, SlotHolder] | None = None
    try:
        admission = await admit(handle, job, leases, wiring.lease_ms)
        if admission.slot_key is not None and leases is not None:
            key, holder = admission.slot_key, SlotHolder(job.id, job.claims)
            slot = (key, holder)
            keeper.hold(f"fleet slot {key}", lambda: leases.renew(key, holder, wiring.lease_ms))
        if admission.verdict == "shed":
            return await _shed(wiring, job)
        if admission.verdict == "refuse":
            return await _refuse(wiring, handle, job, admission.reason or "busy")
        keeper.start()
        return await execute_job(
            handle,
            job,
            driver=wiring.backend.jobs,
            clock=wiring.clock,
            signal=signal,
            hooks=wiring.hooks_for(handle),
            refusal=admission.error,
            steps=wiring.backend.steps,
            events=wiring.backend.events,
            ack=wiring.acks.ack,
        )
    finally:
        keeper.stop()
        if slot is not None and leases is not None:
            try:
                await leases.release(*slot)
            except Exception:
                log.warning(
                    "jobs.worker.slot-release-failed", extra={"job_id": job.id}, exc_info=True
                )


async def _shed(wiring: RunWiring, job: ClaimedJob) -> Execution:
    """A busy key with `when_busy="wait"`: back to ready, uncounted, no `last_error`."""
    at = wiring.clock.now_ms() + SHED_DELAY_MS
    if not await wiring.backend.jobs.nack(
        job.claim, Nack("shed", run_at_ms=at, counts_as_attempt=False)
    ):
        return _unowned(job, "shed")
    log.info("jobs.worker.shed", extra={"job_id": job.id, "job": job.name})
    return Execution("shed", landed=True, resume_at_ms=at)


async def _refuse(
    wiring: RunWiring, handle: JobHandle[Any], job: ClaimedJob, reason: str
) -> Execution:
    """A busy key with `when_busy="fail"` and evidence of another holder: failed, uncounted, body never run."""
    nack = Nack("fail", error=f"refused: {reason}", counts_as_attempt=False)
    if not await wiring.backend.jobs.nack(job.claim, nack):
        return _unowned(job, "refused")
    event = Settled(
        job.id,
        job.run_id,
        job.name,
        job.queue,
        "refused",
        job.attempt - 1,
        tenant_of(handle, job.payload),
        nack.error,
    )
    await announce_settled(wiring.hooks_for(handle), event)
    return Execution("refused", landed=True, error=nack.error)


async def _settle_unknown(wiring: RunWiring, job: ClaimedJob) -> Execution:
    """A row names a job this worker does not know: a counted failed attempt, so it surfaces as dead."""
    error = str(JobNotRegisteredError(f"no job named {job.name!r} is registered in this worker"))
    outcome: Outcome
    if job.attempt >= job.max_attempts:
        nack = Nack("dead" if job.dead_letter else "fail", error)
        outcome = "dead-lettered" if job.dead_letter else "dropped"
    else:
        nack = Nack("retry", error, wiring.clock.now_ms() + SHED_DELAY_MS)
        outcome = "retried"
    if not await wiring.backend.jobs.nack(job.claim, nack):
        return _unowned(job, outcome)
    return Execution(outcome, landed=True, error=error, resume_at_ms=nack.run_at_ms)


def _unowned(job: ClaimedJob, outcome: Outcome) -> Execution:
    log.warning(
        "jobs.settle.unowned", extra={"job_id": job.id, "job": job.name, "outcome": outcome}
    )
    return Execution("lease-lost", landed=False)


async def announce_buried(wiring: RunWiring, buried: BuriedJob) -> None:
    """The claim buried a lapsed lease on its final attempt: announce it as the ending it is."""
    handle = wiring.registry.jobs.get(buried.name)
    outcome: Outcome = "dead-lettered" if buried.state == "dead" else "dropped"
    log.warning(
        "jobs.claim.buried", extra={"job_id": buried.id, "job": buried.name, "outcome": outcome}
    )
    event = Settled(
        buried.id,
        buried.run_id,
        buried.name,
        buried.queue,
        outcome,
        buried.attempt,
        tenant_of(handle, buried.payload),
        LAPSED_ON_FINAL_ATTEMPT,
    )
    await announce_settled(wiring.hooks_for(handle), event)
