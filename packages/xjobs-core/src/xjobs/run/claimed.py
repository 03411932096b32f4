"""One claimed job, wired: its run record, admission, heartbeat and fleet-slot renewal, `execute_job`, the slot's release."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import BuriedJob, ClaimedJob
from xjobs.contract.stores import SlotHolder
from xjobs.declare.registry import Registry
from xjobs.run.admit import RateGate, admit
from xjobs.run.execute import execute_job
from xjobs.run.heartbeat import LeaseKeeper
from xjobs.run.record import RunRecord
from xjobs.run.settle import Execution, Settler
from xjobs.run.signal import RunSignal
from xjobs.run.threads import BodyThreads

log = logging.getLogger("xjobs.run.claimed")


@dataclass(frozen=True, slots=True)
class RunWiring:
    """What every run of one worker shares: the stores, the registry, the clock, the settler, the lease."""

    backend: Backend
    registry: Registry
    clock: Clock
    settler: Settler
    lease_ms: int
    heartbeat_ms: int
    threads: BodyThreads
    rates: RateGate | None = None


async def run_claimed(wiring: RunWiring, job: ClaimedJob, signal: RunSignal) -> Execution:
    """Admit, run and settle one claimed job, observed from admission to settle when telemetry is on."""
    observer = wiring.settler.observer
    if not observer.enabled:
        return await _run_claimed(wiring, job, signal)
    with observer.running(job):
        return await _run_claimed(wiring, job, signal)


async def _run_claimed(wiring: RunWiring, job: ClaimedJob, signal: RunSignal) -> Execution:
    """Admit, run and settle one claimed job; the fleet slot is taken inside the `try`, released awaited."""
    run = RunRecord.open(wiring.registry.jobs.get(job.name), job)
    if run.handle is None:
        return await wiring.settler.unknown(run)
    slots = wiring.backend.slots
    keeper = LeaseKeeper(
        wiring.backend.jobs,
        run.claim,
        lease_ms=wiring.lease_ms,
        every_ms=wiring.heartbeat_ms,
        signal=signal,
    )
    slot: tuple[str, SlotHolder] | None = None
    try:
        try:
            admission = await admit(run, slots, wiring.lease_ms, wiring.rates)
        except Exception:
            # The slot store failed before the run started: hand the job back uncounted rather
            # than strand it in `running` until its lease lapses and costs it an attempt.
            log.warning("jobs.worker.admission-failed", extra={"job_id": job.id}, exc_info=True)
            landed = await wiring.settler.hand_back(job)
            return Execution("handed-back", landed=landed)
        if admission.slot_key is not None and slots is not None:
            key, holder = admission.slot_key, SlotHolder(job.id, job.claims)
            slot = (key, holder)
            keeper.hold(f"fleet slot {key}", lambda: slots.renew(key, holder, wiring.lease_ms))
        keeper.start()
        if admission.verdict == "deferred":
            return await wiring.settler.defer(run, admission.wait_ms, holds=keeper.holds)
        if admission.verdict == "shed":
            return await wiring.settler.shed(run, holds=keeper.holds)
        if admission.verdict == "refuse":
            return await wiring.settler.refuse(run, admission.reason or "busy", holds=keeper.holds)
        return await execute_job(
            run,
            settler=wiring.settler,
            clock=wiring.clock,
            signal=signal,
            refusal=admission.error,
            steps=wiring.backend.steps,
            events=wiring.backend.events,
            holds=keeper.holds,
            threads=wiring.threads,
        )
    finally:
        keeper.stop()
        if slot is not None and slots is not None:
            try:
                await slots.release(*slot)
            except Exception:
                log.warning(
                    "jobs.worker.slot-release-failed", extra={"job_id": job.id}, exc_info=True
                )


async def announce_buried(wiring: RunWiring, buried: BuriedJob) -> None:
    """The claim buried a lapsed lease on its final attempt: the settle room announces it."""
    await wiring.settler.buried(buried, wiring.registry.jobs.get(buried.name))
