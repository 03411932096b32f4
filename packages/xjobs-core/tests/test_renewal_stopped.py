"""A lease renewal re-reads `stopped()` after every await (semantics.md, "The worker"): an answer
or a lookup that returns after the run settled or was aborted for another reason changes nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

import xjobs
from xjobs.contract.driver import Claim, ClaimedJob, ClaimOptions, JobDriver, JobRecord
from xjobs.errors import DrainingError, JobCancelledError
from xjobs.run.heartbeat import BeatSchedule, LeaseKeeper
from xjobs.run.signal import RunSignal
from xjobs.testing.rows import new_job

LEASE_MS = 3_000
EVERY_MS = 10


class GatedDriver:
    """The memory backend's job driver, with a heartbeat and a `get` that wait for a gate."""

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner
        self.answer_held = False  # what a heartbeat answers once its gate opens
        self.beating, self.beat_gate = asyncio.Event(), asyncio.Event()
        self.looking, self.look_gate = asyncio.Event(), asyncio.Event()
        self.heartbeats = 0
        self.looks = 0
        self.slot_renewals = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        self.heartbeats += 1
        self.beating.set()
        await self.beat_gate.wait()
        return self.answer_held

    async def get(self, job_id: str) -> JobRecord | None:
        self.looks += 1
        self.looking.set()
        await self.look_gate.wait()
        return await self.inner.get(job_id)

    async def renew_slot(self) -> bool:
        self.slot_renewals += 1
        return True


@dataclass
class Held:
    """One claimed job with its keeper, its run's signal and the gated driver it beats through."""

    job: ClaimedJob
    keeper: LeaseKeeper
    signal: RunSignal
    driver: GatedDriver


@pytest_asyncio.fixture
async def held() -> AsyncIterator[Held]:
    backend = await xjobs.connect("memory://")
    try:
        await backend.jobs.enqueue([new_job(queue="q")])
        (job,) = (await backend.jobs.claim(ClaimOptions("worker-a", {"q": 1}, LEASE_MS))).jobs
        driver = GatedDriver(backend.jobs)
        signal = RunSignal()
        beats = BeatSchedule(driver, lease_ms=LEASE_MS, every_ms=EVERY_MS)  # type: ignore[arg-type]
        keeper = LeaseKeeper(job.claim, signal, beats)
        keeper.hold("fleet slot k", driver.renew_slot)
        yield Held(job, keeper, signal, driver)
        keeper.stop()
    finally:
        await backend.close()


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_missed_fence_answered_after_the_run_settled_is_not_read(held: Held) -> None:
    held.keeper.start()
    await asyncio.wait_for(held.driver.beating.wait(), 5)
    held.keeper.stop()  # the run settled while its heartbeat was in flight
    held.driver.beat_gate.set()
    await _turns()
    assert (held.signal.reason, held.driver.looks, held.driver.slot_renewals) == (None, 0, 0)


@pytest.mark.asyncio
async def test_a_missed_fence_answered_after_an_abort_looks_nothing_up(
    held: Held, caplog: pytest.LogCaptureFixture
) -> None:
    held.keeper.start()
    await asyncio.wait_for(held.driver.beating.wait(), 5)
    held.signal.abort(DrainingError("the drain cut-off"))
    held.driver.beat_gate.set()
    await _turns()
    assert isinstance(held.signal.reason, DrainingError)
    assert (held.driver.looks, held.driver.slot_renewals) == (0, 0)
    assert "jobs.lease.lost" not in caplog.messages


@pytest.mark.asyncio
async def test_a_held_job_lease_renewed_after_an_abort_renews_no_slot(held: Held) -> None:
    held.driver.answer_held = True
    held.keeper.start()
    await asyncio.wait_for(held.driver.beating.wait(), 5)
    held.signal.abort(DrainingError("the drain cut-off"))
    held.driver.beat_gate.set()
    await _turns()
    assert held.driver.slot_renewals == 0


@pytest.mark.asyncio
async def test_a_fence_lookup_answered_after_an_abort_neither_logs_nor_aborts_again(
    held: Held, caplog: pytest.LogCaptureFixture
) -> None:
    """The fence missed and the keeper asks why; the drain aborts the run meanwhile: the answer
    is not read, so no `jobs.lease.lost` is logged for a run that was interrupted."""
    caplog.set_level(logging.WARNING, logger="xjobs.run.heartbeat")
    held.driver.beat_gate.set()
    held.keeper.start()
    await asyncio.wait_for(held.driver.looking.wait(), 5)
    held.signal.abort(DrainingError("the drain cut-off"))
    held.driver.look_gate.set()
    await _turns()
    assert isinstance(held.signal.reason, DrainingError)
    assert "jobs.lease.lost" not in caplog.messages


@pytest.mark.asyncio
async def test_a_fence_lookup_that_finds_the_job_cancelled_aborts_the_run_as_cancelled(
    held: Held,
) -> None:
    """The control: with nothing else stopping the run, the lookup decides the reason."""
    held.driver.beat_gate.set()
    held.driver.look_gate.set()
    await held.driver.inner.cancel(held.job.id, None)
    held.keeper.start()
    for _ in range(200):
        if held.signal.aborted:
            break
        await asyncio.sleep(0.01)
    assert isinstance(held.signal.reason, JobCancelledError)
