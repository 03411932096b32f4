"""The Redis operator surface beyond the parity suite: its keys, its bounds and its costs."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.introspection import (
    DAY_MS,
    MAX_ERROR_HISTORY,
    MINUTE_MS,
    JobFilter,
    JobIntrospection,
    JobPosition,
)
from xjobs.contract.stores import EventWait
from xjobs.run.settle import parking, retrying
from xjobs.testing import rows
from xjobs_redis import walk
from xjobs_redis.counters import RETENTION_MS
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys
from xjobs_redis.scripts import read_lua
from xjobs_redis.walk import Walk, sources


def ops(backend: Backend) -> JobIntrospection:
    assert backend.introspection is not None
    return backend.introspection


async def claim(backend: Backend, queue: str = "q", n: int = 10) -> list[str]:
    result = await backend.jobs.claim(ClaimOptions("w-1", {queue: n}, 30_000))
    return [job.id for job in result.jobs]


def lua_constant(name: str) -> str:
    for line in read_lua("lib").splitlines():
        if line.startswith(f"local {name} = "):
            return line.split("=", 1)[1].split("--", 1)[0].strip()
    raise AssertionError(f"lib.lua has no {name}")


def test_lib_lua_keeps_the_bounds_of_the_contract() -> None:
    assert int(lua_constant("ERROR_HISTORY")) == MAX_ERROR_HISTORY
    assert int(lua_constant("MINUTE_MS")) == MINUTE_MS
    assert lua_constant("MINUTE_RETENTION_MS") == "2 * DAY_MS"
    assert lua_constant("HOUR_RETENTION_MS") == "30 * DAY_MS"
    assert lua_constant("DAY_RETENTION_MS") == "365 * DAY_MS"
    assert RETENTION_MS == {"minute": 2 * DAY_MS, "hour": 30 * DAY_MS, "day": 365 * DAY_MS}


@pytest.mark.asyncio
class TestPauses:
    async def test_a_queue_that_appears_later_inherits_a_paused_job_name(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        await ops(manual_backend).pause("job", "held")
        await manual_backend.jobs.enqueue([rows.new_job(name="held", queue="later")])
        assert await client.smembers(Keys(prefix).paused_names("later")) == {"held"}
        assert await claim(manual_backend, "later") == []

    async def test_a_queue_a_scheduler_fire_creates_inherits_a_paused_job_name(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        await ops(manual_backend).pause("job", "report")
        assert manual_backend.scheduler is not None
        job = rows.new_job(name="report", queue="cron")
        assert await manual_backend.scheduler.fire("nightly", None, 1_000, job)
        assert await client.smembers(Keys(prefix).paused_names("cron")) == {"report"}
        assert await claim(manual_backend, "cron") == []

    async def test_a_paused_name_is_passed_over_where_it_stands(
        self, manual_backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        held = rows.new_job(name="held", queue="q")
        await manual_backend.jobs.enqueue([held])
        clock.advance(1)
        free = rows.new_job(name="free", queue="q")
        await manual_backend.jobs.enqueue([free])
        await ops(manual_backend).pause("job", "held")
        before = await client.zrange(Keys(prefix).ready("q"), 0, -1, withscores=True)
        assert await claim(manual_backend) == [free.id]
        after = await client.zrange(Keys(prefix).ready("q"), 0, -1, withscores=True)
        assert after == before[:1]  # the held job kept its entry (and score) in ready

    async def test_resuming_a_job_name_clears_it_from_every_queue(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        for queue in ("a", "b"):
            await manual_backend.jobs.enqueue([rows.new_job(name="held", queue=queue)])
        await ops(manual_backend).pause("job", "held")
        assert await ops(manual_backend).resume("job", "held") is True
        k = Keys(prefix)
        assert not await client.exists(k.paused_names("a"), k.paused_names("b"), k.pauses())


@pytest.mark.asyncio
class TestCounters:
    async def test_the_counter_keys_expire_and_a_rollup_trims_past_retention(
        self, manual_backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        k = Keys(prefix)
        await manual_backend.jobs.enqueue([rows.new_job(queue="q")])
        (job,) = (await manual_backend.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))).jobs
        await manual_backend.jobs.ack(job.claim)
        minute = k.counters("q", "minute")
        assert 0 < await client.pttl(minute) <= RETENTION_MS["minute"] + MINUTE_MS
        assert await ops(manual_backend).rollup_counters(clock.now_ms() + MINUTE_MS) == 1
        assert 0 < await client.pttl(k.counters("q", "day")) <= RETENTION_MS["day"] + DAY_MS
        clock.advance(RETENTION_MS["minute"] + 2 * MINUTE_MS)
        assert await ops(manual_backend).rollup_counters(clock.now_ms()) == 0
        assert await ops(manual_backend).counters("minute", 0) == []
        assert [b.count for b in await ops(manual_backend).counters("hour", 0)] == [1]

    async def test_a_new_minute_clears_expired_ones_without_a_rollup(
        self, manual_backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        for _ in range(2):
            await manual_backend.jobs.enqueue([rows.new_job(queue="q")])
            (job,) = (await manual_backend.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))).jobs
            await manual_backend.jobs.ack(job.claim)
            clock.advance(RETENTION_MS["minute"] + MINUTE_MS)
        assert await client.hlen(Keys(prefix).counters("q", "minute")) == 1


@pytest.mark.asyncio
class TestErrors:
    async def test_a_job_that_never_failed_writes_no_error_field(
        self, manual_backend: Backend, client: Redis, prefix: str
    ) -> None:
        await manual_backend.jobs.enqueue([rows.new_job(queue="q")])
        (job,) = (await manual_backend.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))).jobs
        await manual_backend.jobs.ack(job.claim)
        assert not await client.exists(Keys(prefix).errors("q"))

    async def test_remove_drops_the_errors_and_a_cancelled_jobs_event_wait(
        self, manual_backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        k = Keys(prefix)
        new = rows.new_job(queue="q")
        await manual_backend.jobs.enqueue([new])
        (job,) = (await manual_backend.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))).jobs
        await manual_backend.jobs.nack(job.claim, retrying("E: once", clock.now_ms()))
        (job,) = (await manual_backend.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))).jobs
        assert manual_backend.events is not None
        wait = EventWait(new.id, new.run_id, "q", "paid", "order.paid", "{}", clock.now_ms(), None)
        await manual_backend.events.park(job.claim, wait, parking(clock.now_ms() + 60_000))
        assert await client.hexists(k.event_waits("q"), new.id)
        await manual_backend.jobs.cancel(new.id)
        assert (await ops(manual_backend).remove(new.id)).status == "done"
        assert not await client.hexists(k.errors("q"), new.id)
        assert not await client.hexists(k.event_waits("q"), new.id)


@pytest.mark.asyncio
class TestWalk:
    async def test_a_page_examines_only_its_rows_beside_many_jobs(
        self, manual_backend: Backend, client: Redis, clock: ManualClock, prefix: str
    ) -> None:
        for _ in range(4):
            await manual_backend.jobs.enqueue([rows.new_job(queue="q") for _ in range(500)])
            clock.advance(1)
        found = sources(["q"], JobFilter(), ("ready", "running", "waiting"))
        x = Executor(client, clock)
        await x.load()
        page = Walk(x, Keys(prefix), found, newest=True, fields=("id",))
        assert len(await page.take(50)) == 50
        assert page.examined == 50
        (last,) = await page.take(1)
        start = JobPosition(last.created_at_ms, last.id)
        after = Walk(x, Keys(prefix), found, newest=True, start=start)
        assert len(await after.take(50)) == 50
        assert after.examined == 50

    async def test_a_filter_the_index_does_not_serve_pages_exactly_in_small_steps(
        self, manual_backend: Backend, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(walk, "WALK_BUDGET", 2)
        wanted: list[str] = []
        for n in range(30):
            queue = "a" if n % 3 else "b"
            name = "send" if n % 4 == 0 else "other"
            job = rows.new_job(queue=queue, name=name)
            await manual_backend.jobs.enqueue([job])
            if name == "send":
                wanted.append(job.id)
            clock.advance(n % 2)
        await claim(manual_backend, "a", 3)
        where = JobFilter(name="send")
        listed: list[str] = []
        after = None
        while True:
            page = await ops(manual_backend).list_jobs(where, limit=3, after=after)
            listed += [j.id for j in page]
            if len(page) < 3:
                break
            after = page[-1].position
        everything = await ops(manual_backend).list_jobs(JobFilter(), limit=100, after=None)
        order = [j.id for j in everything]
        assert listed == [i for i in order if i in set(wanted)]
        assert sorted(listed) == sorted(wanted)

    async def test_a_bulk_retry_takes_the_oldest_across_queues(
        self, manual_backend: Backend, clock: ManualClock
    ) -> None:
        ids = []
        for queue in ("zeta", "alpha", "zeta"):
            job = rows.new_job(queue=queue, max_attempts=1)
            await manual_backend.jobs.enqueue([job])
            await manual_backend.jobs.cancel(job.id)
            ids.append(job.id)
            clock.advance(1)
        result = await ops(manual_backend).retry_many(JobFilter(), 2)
        states = [(await manual_backend.jobs.get(i)).state for i in ids]  # type: ignore[union-attr]
        assert (result.moved, result.remaining, states) == (2, 1, ["ready", "ready", "cancelled"])
