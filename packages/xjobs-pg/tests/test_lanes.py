"""The lanes: statements on kept connections, each handed back to the pool when found closed, after
a failure other than a server error, after sitting idle, and at close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from xjobs_pg.lanes import IDLE_HAND_BACK_S, Lanes
from xjobs_pg.testing import server_dsn


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    opened = await asyncpg.create_pool(server_dsn(), min_size=0, max_size=4)
    try:
        yield opened
    finally:
        opened.terminate()


async def backends(lanes: Lanes, count: int) -> set[int]:
    """The server pids of `count` statements run at once on `lanes`."""
    rows = await asyncio.gather(
        *(lanes.fetchrow("select pg_backend_pid() as pid, pg_sleep(0.05)") for _ in range(count))
    )
    return {row["pid"] for row in rows if row is not None}


@pytest.mark.asyncio
async def test_statements_reuse_kept_connections_up_to_keep_and_overflow_to_the_pool(
    pool: asyncpg.Pool,
) -> None:
    lanes = Lanes(pool, keep=2)
    assert len(await backends(lanes, 3)) == 3  # the third ran on a pooled connection
    assert lanes.kept == 2
    again = {row["pid"] for row in await lanes.fetch("select pg_backend_pid() as pid")}
    assert lanes.kept == 2
    assert again <= await backends(lanes, 2)
    await lanes.close()
    assert lanes.kept == 0
    await asyncio.wait_for(pool.close(), 5)  # nothing is left acquired


@pytest.mark.asyncio
async def test_a_server_error_keeps_the_connection_and_a_closed_one_goes_back(
    pool: asyncpg.Pool,
) -> None:
    lanes = Lanes(pool, keep=1)
    with pytest.raises(asyncpg.DivisionByZeroError):
        await lanes.fetch("select 1 / 0")
    assert lanes.kept == 1
    (pid,) = await backends(lanes, 1)
    async with pool.acquire() as other:
        await other.execute("select pg_terminate_backend($1)", pid)
    await asyncio.sleep(0.2)  # the kept connection sees its socket close
    assert await lanes.fetchrow("select 1 as one") is not None
    assert pid not in await backends(lanes, 1)
    await lanes.close()


@pytest.mark.asyncio
async def test_a_cancelled_statement_hands_its_connection_back(pool: asyncpg.Pool) -> None:
    lanes = Lanes(pool, keep=1)
    await lanes.execute("select 1")
    assert lanes.kept == 1
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await lanes.execute("select pg_sleep(5)")
    assert lanes.kept == 0
    assert [row["two"] for row in await lanes.fetch("select 2 as two")] == [2]
    await lanes.close()


@pytest.mark.asyncio
async def test_a_connection_idle_past_the_hand_back_goes_back_to_the_pool(
    pool: asyncpg.Pool,
) -> None:
    ticks = Ticks()
    lanes = Lanes(pool, keep=2, clock=ticks)
    await backends(lanes, 2)
    assert lanes.kept == 2
    ticks.now += IDLE_HAND_BACK_S + 1
    await lanes.execute("select 1")  # one of the two: the other sat idle past the hand-back
    assert lanes.kept == 1
    await lanes.close()
    await asyncio.wait_for(pool.close(), 5)
