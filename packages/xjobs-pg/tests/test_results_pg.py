"""Postgres results beyond the parity suite: the notify rule (only a watched job's finish
notifies, once), the prompt wake of a waiter, a watch that leaves the job row to a racing claim,
and the version 6 upgrade."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from xjobs.contract.backend import Backend
from xjobs.contract.driver import BatchAck, Claim, ClaimOptions
from xjobs.contract.results import ResultStore
from xjobs.run.settle import ending, retrying
from xjobs.testing.rows import new_job
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.params import WatchParams
from xjobs_pg.schema import quote_schema, settled_channel
from xjobs_pg.sql import Statements
from xjobs_pg.testing import WITHOUT_CHILDREN, opened, schema_structure, session

QUEUE = "results"
QUIET_S = 0.3


@pytest_asyncio.fixture
async def backend(schema: str) -> AsyncIterator[Backend]:
    async with opened(schema) as opened_backend:
        yield opened_backend


def results_of(backend: Backend) -> ResultStore:
    assert backend.results is not None
    return backend.results


async def claimed(backend: Backend, n: int = 1) -> list[Claim]:
    await backend.jobs.enqueue([new_job(queue=QUEUE) for _ in range(n)])
    result = await backend.jobs.claim(ClaimOptions("worker-a", {QUEUE: n}, 30_000))
    assert len(result.jobs) == n
    return [job.claim for job in result.jobs]


async def watch(conn: asyncpg.Connection, schema: str, job_id: str) -> None:
    """Register a watch of a job as `wait` does, from a test session (no waiter of the backend)."""
    sql = Statements(quote_schema(schema))["result_watch"]
    params = WatchParams(job_id, "test-watch", settled_channel(schema), None, 60_000)
    await conn.execute(sql, *params.bind())


async def heard_on(conn: asyncpg.Connection, schema: str) -> asyncio.Queue[str]:
    heard: asyncio.Queue[str] = asyncio.Queue()
    await conn.add_listener(settled_channel(schema), lambda *args: heard.put_nowait(args[3]))
    return heard


async def drained(heard: asyncio.Queue[str]) -> list[str]:
    await asyncio.sleep(QUIET_S)
    return [heard.get_nowait() for _ in range(heard.qsize())]


@pytest.mark.asyncio
async def test_an_unwatched_finish_notifies_nothing(backend: Backend, schema: str) -> None:
    acked, completed, dead = await claimed(backend, 3)
    async with session() as conn:
        heard = await heard_on(conn, schema)
        assert await backend.jobs.ack(acked) is True
        assert await results_of(backend).complete(completed, "1") is True
        assert await backend.jobs.nack(dead, ending(True, "E: boom")) is True
        assert await drained(heard) == []


@pytest.mark.asyncio
async def test_each_finishing_statement_notifies_a_watched_job_once(
    backend: Backend, schema: str
) -> None:
    acked, completed, retried, dead = await claimed(backend, 4)
    await backend.jobs.enqueue([cancelled := new_job(queue="elsewhere")])
    async with session() as conn:
        heard = await heard_on(conn, schema)
        for claim in (acked, completed, retried, dead):
            await watch(conn, schema, claim.job_id)
        await watch(conn, schema, cancelled.id)
        assert await backend.jobs.ack(acked) is True
        assert await results_of(backend).complete(completed, "1") is True
        assert await backend.jobs.nack(retried, retrying("E: again", None)) is True
        assert await backend.jobs.nack(dead, ending(True, "E: boom")) is True
        assert (await backend.jobs.cancel(cancelled.id)).status == "done"
        assert await backend.jobs.ack(acked) is False  # fenced: no second notification
        got = await drained(heard)
    assert sorted(got) == sorted([acked.job_id, completed.job_id, dead.job_id, cancelled.id])


@pytest.mark.asyncio
async def test_the_claims_burial_of_a_watched_job_notifies(backend: Backend, schema: str) -> None:
    await backend.jobs.enqueue([job := new_job(queue=QUEUE, max_attempts=1)])
    lapsing = ClaimOptions("worker-a", {QUEUE: 1}, 1)
    assert len((await backend.jobs.claim(lapsing)).jobs) == 1
    async with session() as conn:
        heard = await heard_on(conn, schema)
        await watch(conn, schema, job.id)
        await asyncio.sleep(0.05)
        buried = await backend.jobs.claim(lapsing)
        got = await drained(heard)
    assert ([b.id for b in buried.buried], got) == ([job.id], [job.id])


@pytest.mark.asyncio
async def test_a_job_an_older_release_flagged_notifies_and_a_requeue_clears_the_flag(
    backend: Backend, schema: str
) -> None:
    first, second = await claimed(backend, 2)
    table = f"{quote_schema(schema)}.jobs"
    async with session() as conn:
        heard = await heard_on(conn, schema)
        for claim in (first, second):  # the watched column, as a version 7-12 waiter set it
            await conn.execute(
                f"update {table} set watched = $2 where id = $1",
                claim.job_id,
                settled_channel(schema),
            )
        assert await backend.jobs.ack(first) is True
        assert await drained(heard) == [first.job_id]
        assert await results_of(backend).complete(second, '"x"') is True
        assert (await backend.jobs.requeue(second.job_id)).status == "done"
        row = await conn.fetchrow(
            f"select result, watched from {table} where id = $1", second.job_id
        )
    assert row is not None
    assert (row["result"], row["watched"]) == (None, None)


@pytest.mark.asyncio
async def test_a_watch_in_flight_leaves_the_job_to_a_racing_claim(
    backend: Backend, schema: str
) -> None:
    # A claim skips a row another statement holds locked: a watch that wrote the job row made
    # the claim that raced it (both follow the enqueue at once) miss the job until its next poll.
    await backend.jobs.enqueue([job := new_job(queue=QUEUE)])
    async with session() as conn, conn.transaction():
        await watch(conn, schema, job.id)
        state = Statements(quote_schema(schema))["result_state"]
        assert await conn.fetchval(state, job.id) == "ready"
        claimed_now = await backend.jobs.claim(ClaimOptions("worker-a", {QUEUE: 1}, 30_000))
    assert [j.id for j in claimed_now.jobs] == [job.id]


@pytest.mark.asyncio
async def test_a_finish_in_flight_as_the_watch_lands_is_read_once_it_commits(
    backend: Backend, schema: str
) -> None:
    # A finishing statement that began before the watch was committed saw no watcher and will
    # notify nothing: the waiter's read of the state waits for its commit and answers it.
    (claim,) = await claimed(backend)
    results = results_of(backend)
    async with session() as conn:
        finishing = conn.transaction()
        await finishing.start()
        await conn.execute(
            f"update {quote_schema(schema)}.jobs set state = 'completed', finished_at_ms = 1, "
            "lease_until_ms = null where id = $1",
            claim.job_id,
        )
        started = time.monotonic()
        waiting = asyncio.create_task(results.wait(claim.job_id, 20_000))
        await asyncio.sleep(QUIET_S)
        assert not waiting.done()
        await finishing.commit()
        await asyncio.wait_for(waiting, timeout=5)
    assert time.monotonic() - started < 5


async def watch_rows(schema: str) -> int:
    async with session() as conn:
        count = await conn.fetchval(f"select count(*) from {quote_schema(schema)}.result_watches")
    assert isinstance(count, int)
    return count


async def until_watched(schema: str) -> None:
    for _ in range(200):
        if await watch_rows(schema):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the wait registered no watch")


@pytest.mark.asyncio
async def test_ack_many_notifies_each_watched_job_once(backend: Backend, schema: str) -> None:
    watched, unwatched = await claimed(backend, 2)
    async with session() as conn:
        heard = await heard_on(conn, schema)
        await watch(conn, schema, watched.job_id)
        assert isinstance(backend.jobs, BatchAck)
        assert await backend.jobs.ack_many([watched, unwatched]) == [True, True]
        assert await drained(heard) == [watched.job_id]


@pytest.mark.asyncio
async def test_a_finish_that_notified_no_one_is_found_by_the_read_again(
    backend: Backend, schema: str
) -> None:
    # A finishing statement whose snapshot predates the watch sees no watcher and notifies no
    # one; here it takes the row only after the waiter's first read, so nothing makes that read
    # wait. The read again a moment into the wait finds it, long before the wait's own end.
    (claim,) = await claimed(backend)
    started = time.monotonic()
    waiting = asyncio.create_task(results_of(backend).wait(claim.job_id, 20_000))
    await until_watched(schema)
    async with session() as conn:
        await conn.execute(
            f"update {quote_schema(schema)}.jobs set state = 'completed', finished_at_ms = 1, "
            "lease_until_ms = null where id = $1",
            claim.job_id,
        )
    await asyncio.wait_for(waiting, timeout=5)
    assert time.monotonic() - started < 5
    assert await watch_rows(schema) == 0


@pytest.mark.asyncio
async def test_a_finish_that_takes_the_row_late_and_notified_no_one_is_found_by_a_later_read(
    backend: Backend, schema: str
) -> None:
    # The same finish, but landing well after the waiter's first read again (a statement that
    # waited on another lock, or a loaded machine): the reads go on at doubling intervals up to a
    # second, so the wait still ends long before its own 20 s (it ended at 20 s before).
    (claim,) = await claimed(backend)
    waiting = asyncio.create_task(results_of(backend).wait(claim.job_id, 20_000))
    await until_watched(schema)
    await asyncio.sleep(0.4)
    async with session() as conn:
        await conn.execute(
            f"update {quote_schema(schema)}.jobs set state = 'completed', finished_at_ms = 1, "
            "lease_until_ms = null where id = $1",
            claim.job_id,
        )
    await asyncio.wait_for(waiting, timeout=5)
    assert await watch_rows(schema) == 0


@pytest.mark.asyncio
async def test_a_cancelled_wait_deletes_its_watch(backend: Backend, schema: str) -> None:
    (claim,) = await claimed(backend)
    waiting = asyncio.create_task(results_of(backend).wait(claim.job_id, 20_000))
    await until_watched(schema)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await watch_rows(schema) == 0


@pytest.mark.asyncio
async def test_a_wait_deletes_its_watch_and_a_watch_left_behind_expires(
    backend: Backend, schema: str
) -> None:
    (claim,) = await claimed(backend)
    watches = f"{quote_schema(schema)}.result_watches"
    await results_of(backend).wait(claim.job_id, 50)  # the job runs on: the wait times out
    async with session() as conn:
        assert await conn.fetchval(f"select count(*) from {watches}") == 0
        # the watch of a process that died waiting, expired
        await conn.execute(
            f"insert into {watches} (job_id, token, channel, expires_at_ms) "
            "values ($1, 'left', 'c', 0)",
            claim.job_id,
        )
        await watch(conn, schema, claim.job_id)
        tokens = [row["token"] for row in await conn.fetch(f"select token from {watches}")]
    assert tokens == ["test-watch"]


@pytest.mark.asyncio
async def test_a_waiter_wakes_on_the_notification_not_the_timeout(backend: Backend) -> None:
    (claim,) = await claimed(backend)
    results = results_of(backend)
    started = time.monotonic()
    waiting = asyncio.create_task(results.wait(claim.job_id, 20_000))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    assert await results.complete(claim, "42") is True
    await asyncio.wait_for(waiting, timeout=5)
    stored = await results.read(claim.job_id)
    assert time.monotonic() - started < 5
    assert stored is not None
    assert (stored.state, stored.result) == ("completed", "42")


@pytest.mark.asyncio
async def test_waiting_on_a_finished_or_unknown_job_returns_at_once(backend: Backend) -> None:
    (claim,) = await claimed(backend)
    results = results_of(backend)
    assert await backend.jobs.ack(claim) is True
    started = time.monotonic()
    await results.wait(claim.job_id, 20_000)
    await results.wait(new_job().id, 20_000)
    await results.wait("not-a-uuid", 20_000)
    assert time.monotonic() - started < 5


# -- the upgrade -------------------------------------------------------------------------------

AS_VERSION_6 = (
    WITHOUT_CHILDREN
    + """
alter table {schema}.jobs drop column result, drop column watched, drop column throttle_until_ms;
update {schema}.schema_version set version = 6;
"""
)


@pytest.mark.asyncio
async def test_opening_a_version_6_schema_adds_the_result_columns(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        (claim,) = await claimed(old)
    async with session() as conn:
        await conn.execute(AS_VERSION_6.format(schema=quote_schema(schema)))
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            assert await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        assert await results_of(upgraded).complete(claim, "[1]") is True
        stored = await results_of(upgraded).read(claim.job_id)
    assert version == SCHEMA_VERSION >= 7
    assert stored is not None
    assert (stored.state, stored.result) == ("completed", "[1]")
