"""One claimed job, wired: its run record, admission, heartbeat and fleet-slot renewal, `execute_job`, the slot's release."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import BuriedJob, ClaimedJob
from xjobs.contract.stores import SlotHolder
from xjobs.declare.registry import Registry
from xjobs.run.admit import RateGate, admit
from xjobs.run.context import RunTools
from xjobs.run.execute import execute_job
from xjobs.run.heartbeat import BeatSchedule, LeaseKeeper
from xjobs.run.record import RunRecord
from xjobs.run.settle import Execution, Settler
from xjobs.run.signal import RunSignal
from xjobs.run.threads import BodyThreads

log = logging.getLogger("xjobs.run.claimed")


@dataclass(frozen=True, slots=True)
class RunWiring:
    """What every run of one worker shares: the stores, the registry, the clock, the settler, the
    lease, the one schedule every run's heartbeat is armed in, and the tools a body's context
    builds its steps and progress from."""

    backend: Backend
    registry: Registry
    clock: Clock
    settler: Settler
    lease_ms: int
    heartbeat_ms: int
    threads: BodyThreads
    rates: RateGate | None = None
    beats: BeatSchedule = field(init=False)
    tools: RunTools = field(init=False)

    def __post_init__(self) -> None:
        backend = self.backend
        beats = BeatSchedule(backend.jobs, lease_ms=self.lease_ms, every_ms=self.heartbeat_ms)
        object.__setattr__(self, "beats", beats)
        tools = RunTools(
            self.clock,
            self.settler.record_progress,
            steps=backend.steps,
            events=backend.events,
            observer=self.settler.observer,
            children=backend.children,
        )
        object.__setattr__(self, "tools", tools)


def run_claimed(
    wiring: RunWiring, job: ClaimedJob, signal: RunSignal
) -> Coroutine[Any, Any, Execution]:
    """Admit, run and settle one claimed job, observed from admission to settle when telemetry is on."""
    if not wiring.settler.observer.enabled:
        return _run_claimed(wiring, job, signal)
    return _observed(wiring, job, signal)


async def _observed(wiring: RunWiring, job: ClaimedJob, signal: RunSignal) -> Execution:
    with wiring.settler.observer.running(job):
        return await _run_claimed(wiring, job, signal)


async def _run_claimed(wiring: RunWiring, job: ClaimedJob, signal: RunSignal) -> Execution:
    """Admit, run and settle one claimed job; the fleet slot is taken inside the `try`, released awaited."""
    run = RunRecord.open(wiring.registry.jobs.get(job.name), job)
    if run.handle is None:
        return await wiring.settler.unknown(run)
    slots = wiring.backend.slots
    keeper = LeaseKeeper(run.claim, signal, wiring.beats)
    slot: tuple[str, SlotHolder] | None = None
    try:
        try:
            admission = await admit(run, slots, wiring.lease_ms, wiring.rates)
        except Exception:
            # The slot store failed before the run started: hand the job back uncounted rather
            # than strand it in `running` until its lease lapses and costs it an attempt.
            log.warning("jobs.worker.admission-failed", extra={"job_id": job.id}, exc_info=True)
            return await wiring.settler.hand_back_unstarted(job)
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
            tools=wiring.tools,
            signal=signal,
            refusal=admission.error,
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
