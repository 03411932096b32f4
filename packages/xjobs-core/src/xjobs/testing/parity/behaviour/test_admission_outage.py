"""Parity: a shed, deferral or refusal the store could not take while the lease held goes back
uncounted, as a failed admission does (semantics.md, "The worker": admission; seed: "a failed shed")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from xjobs import App, Concurrency, JobContext, Rate, Retry, WorkerStats, job
from xjobs.contract.driver import Claim, JobDriver, JobRecord, Nack
from xjobs.contract.stores import SlotHolder
from xjobs.errors import BackendUnavailableError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    QUEUE,
    CountingDriver,
    Item,
    eventually,
    key_of,
    org_of,
    within,
)

pytestmark = pytest.mark.xjobs_parity

# The store is down for this many nacks, and for every heartbeat meanwhile: the admission's own
# nack is retried only while the lease holds (at most 4 tries inside one 300 ms window), so the
# outage outlasts the lease and ends a few tries after it.
NACKS_DOWN = 6
# Past the lapsed lease, a shed's delay and a minute's rate permit, on the driver's clock.
LATER_MS = 61_000
ONE_PER_MINUTE = Rate(limit=1, per=timedelta(minutes=1))
# The first claim is the final attempt: a lapsed lease would bury the job, not retry it.
ONE_ATTEMPT = Retry(attempts=1)
OTHER_HOLDER = SlotHolder("another-job", 1)


class OutageDriver(CountingDriver):
    """A job driver whose next `nacks_down` nacks raise `BackendUnavailableError`, and whose
    heartbeats raise as long as any of them is left: a store down for a while."""

    def __init__(self, inner: JobDriver) -> None:
        super().__init__(inner)
        self.nacks_down = 0

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        """Raise while the outage lasts (each nack spends one), then nack through the real driver."""
        if self.nacks_down > 0:
            self.nacks_down -= 1
            self.settles.append("raised")
            raise BackendUnavailableError("the store did not answer the nack")
        return await super().nack(claim, nack)

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        """Raise while the outage lasts, then renew through the real driver."""
        if self.nacks_down > 0:
            raise BackendUnavailableError("the store did not answer the heartbeat")
        return await super().heartbeat(claim, lease_ms)


def outage_app(parity: ParityEnv, body: object) -> tuple[App, OutageDriver]:
    """An app over the scenario's backend whose job driver can be taken down for a while."""
    driver = OutageDriver(parity.backend.jobs)
    return App(replace(parity.backend, jobs=driver), jobs=[body], clock=parity.clock), driver


async def admitted_through_outage(
    app: App, driver: OutageDriver, job_id: str, nacks_down: int = NACKS_DOWN
) -> tuple[JobRecord, WorkerStats]:
    """Claim the job once while the store is down for `nacks_down` nacks; answer its record once
    the worker closed, and the worker's counts."""
    driver.nacks_down = nacks_down
    worker = app.worker(lease=LEASE, concurrency=1)
    await worker.start()
    await eventually(lambda: worker.stats.claimed == 1, what="the claim")
    worker.stop_accepting()  # the one claim: nothing claims the job again meanwhile
    await within(worker.close(), what="the admission's settle")
    return await app.get_job(job_id), worker.stats


async def run_later(parity: ParityEnv, app: App, job_id: str) -> JobRecord:
    """Once the store is back and the key or the rate is free, run a worker until idle; answer
    the job's record (a lapsed lease on the final attempt would have buried it)."""
    parity.clock.advance(LATER_MS)
    await within(app.run_worker(lease=LEASE, until_idle=True), what="the later run")
    return await app.get_job(job_id)


@pytest.mark.requires("slots")
class TestBusyKeyThroughAnOutage:
    async def test_a_shed_that_could_not_land_is_handed_back_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a shed whose nack the store could not take while the lease held hands the job
        back uncounted: no attempt charged, and its final attempt is not buried."""
        ran: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1, retry=ONE_ATTEMPT)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(ctx.attempt)

        app, driver = outage_app(parity, body)
        async with app:
            result = await body.enqueue(Item())
            assert body.concurrency is not None
            key = body.concurrency.lease_key(body.name, Item())
            assert await parity.slots.acquire(key, OTHER_HOLDER, 1, LATER_MS)
            record, stats = await admitted_through_outage(app, driver, result.job_id)
            await parity.slots.release(key, OTHER_HOLDER)
            later = await run_later(parity, app, result.job_id)
        assert (record.state, record.attempt) == ("ready", 0)
        assert (stats.handed_back, stats.shed) == (1, 0)
        assert (later.state, later.attempt, ran) == ("completed", 1, [1])

    async def test_a_refusal_that_could_not_land_is_handed_back_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a refusal (`when_busy="fail"`) whose nack the store could not take while the lease
        held hands the job back uncounted, to be admitted afresh: never buried for a run that never started."""
        ran: list[int] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            concurrency=Concurrency(key=org_of, limit=1, when_busy="fail"),
            retry=ONE_ATTEMPT,
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(ctx.attempt)

        app, driver = outage_app(parity, body)
        async with app:
            result = await body.enqueue(Item())
            assert body.concurrency is not None
            key = body.concurrency.lease_key(body.name, Item())
            assert await parity.slots.acquire(key, OTHER_HOLDER, 1, LATER_MS)
            record, stats = await admitted_through_outage(app, driver, result.job_id)
            await parity.slots.release(key, OTHER_HOLDER)
            later = await run_later(parity, app, result.job_id)
        assert (record.state, record.attempt) == ("ready", 0)
        assert (stats.handed_back, stats.refused) == (1, 0)
        assert (later.state, later.attempt, ran) == ("completed", 1, [1])


@pytest.mark.requires("rates")
class TestRateDeferralThroughAnOutage:
    async def test_a_deferral_that_could_not_land_is_handed_back_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a deferral (`XJOBS_RATE_LIMITED`) whose nack the store could not take while the
        lease held hands the job back uncounted: no attempt charged, its final attempt not buried."""
        ran: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            rate=ONE_PER_MINUTE,
            retry=ONE_ATTEMPT,
        )
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input.key)

        app, driver = outage_app(parity, body)
        async with app:
            await body.enqueue(Item(key="first"))  # spends the minute's permit
            await within(app.run_worker(lease=LEASE, until_idle=True), what="the first run")
            second = await body.enqueue(Item(key="second"))
            record, stats = await admitted_through_outage(app, driver, second.job_id)
            later = await run_later(parity, app, second.job_id)
        assert (record.state, record.attempt) == ("ready", 0)
        assert (stats.handed_back, stats.deferred) == (1, 0)
        assert (later.state, later.attempt, ran) == ("completed", 1, ["first", "second"])


@pytest.mark.requires("slots")
class TestFailedAdmissionThroughAnOutage:
    async def test_an_admission_whose_hand_back_could_not_land_is_asked_again_uncounted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: when the slot store fails before the run started and the job store cannot take
        the hand-back either, the worker asks again until it lands: the job goes back uncounted,
        and its final attempt is not buried for a run that never started."""
        ran: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, concurrency=1, retry=ONE_ATTEMPT)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(ctx.attempt)

        slots = parity.slots
        real_acquire = slots.acquire

        async def unreachable(*args: object, **kwargs: object) -> bool:
            raise BackendUnavailableError("the slot store did not answer")

        app, driver = outage_app(parity, body)
        async with app:
            result = await body.enqueue(Item())
            slots.acquire = unreachable  # type: ignore[method-assign]
            try:
                # the hand-back's own backoff (50 ms, doubling) outlasts three failed nacks
                record, stats = await admitted_through_outage(app, driver, result.job_id, 3)
            finally:
                slots.acquire = real_acquire  # type: ignore[method-assign]
            later = await run_later(parity, app, result.job_id)
        assert (record.state, record.attempt, stats.handed_back) == ("ready", 0, 1)
        assert (later.state, later.attempt, ran) == ("completed", 1, [1])
