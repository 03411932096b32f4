"""`AckBatcher`: acks that wait together land in one `ack_many`, each with its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import cast

import pytest
import pytest_asyncio

import xjobs
from xjobs.contract.backend import Backend
from xjobs.contract.driver import Claim, ClaimedJob, ClaimOptions, JobDriver
from xjobs.errors import BackendError
from xjobs.memory.driver import MemoryJobDriver
from xjobs.run.ack_batch import AckBatcher
from xjobs.testing.rows import new_job


class Recorded(MemoryJobDriver):
    """The memory driver as a server's would be (a round trip per call, so its acks are batched),
    recording the size of every `ack_many` and failing on request."""

    in_process = False

    def __init__(self, inner: MemoryJobDriver) -> None:
        self.__dict__.update(inner.__dict__)
        self.batches: list[int] = []
        self.fail_next = False
        self.fail_single = False

    async def ack(self, claim: Claim) -> bool:
        if self.fail_single:
            raise BackendError("the server went away")
        return await super().ack(claim)

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        self.batches.append(len(claims))
        if self.fail_next:
            self.fail_next = False
            raise BackendError("the server went away")
        await asyncio.sleep(0.01)  # a round trip: acks arriving meanwhile wait for the next
        return await super().ack_many(claims)


@pytest_asyncio.fixture
async def backend() -> AsyncIterator[Backend]:
    opened = await xjobs.connect("memory://")
    try:
        yield opened
    finally:
        await opened.close()


async def _claimed(driver: MemoryJobDriver, n: int) -> tuple[ClaimedJob, ...]:
    await driver.enqueue([new_job() for _ in range(n)])
    options = ClaimOptions(worker_id="w", queues={"default": n}, lease_ms=30_000)
    return (await driver.claim(options)).jobs


@pytest.mark.asyncio
async def test_acks_waiting_together_land_in_one_call(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    jobs = await _claimed(driver, 20)
    batcher = AckBatcher(replace(backend, jobs=driver))
    landed = await asyncio.gather(*(batcher.ack(job.claim) for job in jobs))
    assert (landed, driver.batches) == ([True] * 20, [20])


@pytest.mark.asyncio
async def test_acks_arriving_during_a_call_go_in_the_next(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    first, *rest = await _claimed(driver, 6)
    batcher = AckBatcher(replace(backend, jobs=driver))
    leading = asyncio.ensure_future(batcher.ack(first.claim))
    await asyncio.sleep(0.001)  # the first call is in flight
    landed = await asyncio.gather(leading, *(batcher.ack(job.claim) for job in rest))
    assert (landed, driver.batches) == ([True] * 6, [1, 5])


@pytest.mark.asyncio
async def test_a_batch_is_cut_at_max_batch(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    jobs = await _claimed(driver, 7)
    batcher = AckBatcher(replace(backend, jobs=driver), max_batch=3)
    await asyncio.gather(*(batcher.ack(job.claim) for job in jobs))
    assert driver.batches == [3, 3, 1]


@pytest.mark.asyncio
async def test_each_claim_keeps_its_own_answer(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    a, b = await _claimed(driver, 2)
    stale = Claim(job_id=b.id, worker_id="other", claims=b.claims)
    batcher = AckBatcher(replace(backend, jobs=driver))
    assert list(await asyncio.gather(batcher.ack(a.claim), batcher.ack(stale))) == [True, False]


@pytest.mark.asyncio
async def test_a_failed_batch_is_retried_one_ack_at_a_time(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    a, b = await _claimed(driver, 2)
    stale = Claim(job_id=b.id, worker_id="other", claims=b.claims)
    batcher = AckBatcher(replace(backend, jobs=driver))
    driver.fail_next = True
    assert list(await asyncio.gather(batcher.ack(a.claim), batcher.ack(stale))) == [True, False]
    assert (await driver.get(a.id)).state == "completed"  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_an_ack_that_fails_alone_too_raises_and_the_next_batch_lands(
    backend: Backend,
) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    a, b = await _claimed(driver, 2)
    batcher = AckBatcher(replace(backend, jobs=driver))
    driver.fail_next = True
    driver.fail_single = True
    with pytest.raises(BackendError):
        await batcher.ack(a.claim)
    driver.fail_single = False
    assert list(await asyncio.gather(batcher.ack(a.claim), batcher.ack(b.claim))) == [True, True]


class OneByOne:
    """A driver without `ack_many`: the batcher acks straight through `ack`."""

    def __init__(self) -> None:
        self.acked: list[str] = []

    async def ack(self, claim: Claim) -> bool:
        self.acked.append(claim.job_id)
        return True


@pytest.mark.asyncio
async def test_a_driver_without_ack_many_acks_one_by_one(backend: Backend) -> None:
    driver = OneByOne()
    # only `ack` is ever called on a driver without `ack_many`
    batcher = AckBatcher(replace(backend, jobs=cast(JobDriver, driver)))
    claims = [Claim(job_id=f"j{n}", worker_id="w", claims=1) for n in range(3)]
    assert await asyncio.gather(*(batcher.ack(c) for c in claims)) == [True] * 3
    assert driver.acked == ["j0", "j1", "j2"]


@pytest.mark.asyncio
async def test_a_backend_that_does_not_declare_ack_many_acks_one_by_one(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    driver = Recorded(backend.jobs)
    undeclared = replace(backend, jobs=driver, features=frozenset())
    claimed = await _claimed(driver, 2)
    batcher = AckBatcher(undeclared)
    assert await asyncio.gather(*(batcher.ack(job.claim) for job in claimed)) == [True, True]
    assert driver.batches == []


@pytest.mark.asyncio
async def test_an_in_process_driver_acks_straight_through(backend: Backend) -> None:
    # the memory driver declares ack_many (the parity suite runs it), but has no round trip to share
    assert isinstance(backend.jobs, MemoryJobDriver)
    assert "ack_many" in backend.capabilities
    batcher = AckBatcher(backend)
    jobs = await _claimed(backend.jobs, 3)
    assert batcher.batches is False
    assert await asyncio.gather(*(batcher.ack(job.claim) for job in jobs)) == [True] * 3
    assert [(await backend.jobs.get(job.id)).state for job in jobs] == ["completed"] * 3  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_a_driver_with_a_round_trip_batches(backend: Backend) -> None:
    assert isinstance(backend.jobs, MemoryJobDriver)
    assert AckBatcher(replace(backend, jobs=Recorded(backend.jobs))).batches is True
