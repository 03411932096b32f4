"""The enqueue bound on a real server: an enqueue runs at most two inserts (the fast path, then one
statement that answers every row it left), whatever a concurrent publisher or settle did between
them. The race is provoked deterministically: between the two statements the live row the fast
path conflicted with finishes, and a second connection holds a new live row of the same namespace
uncommitted until the second statement waits on it, so that row is committed after the second
statement's snapshot (a lookup by that snapshot cannot see it)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import asyncpg
import pytest
import pytest_asyncio

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.testing.rows import new_job
from xjobs_pg.driver import PostgresJobDriver
from xjobs_pg.executor import Executor
from xjobs_pg.lanes import Lanes
from xjobs_pg.schema import quote_schema
from xjobs_pg.testing import opened, server_dsn, session

NOW = 1_700_000_000_000
KEY = "order-42"


class CountingLanes:
    """The lanes an enqueue runs its statements on, counting them; `before(n)` runs before the n-th."""

    def __init__(self, lanes: Lanes, before: Callable[[int], Awaitable[None]]) -> None:
        self._lanes = lanes
        self._before = before
        self.statements: list[str] = []

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        self.statements.append(query)
        await self._before(len(self.statements))
        return await self._lanes.fetch(query, *args)


@pytest_asyncio.fixture
async def backend(schema: str) -> AsyncIterator[Backend]:
    async with opened(schema, ManualClock(NOW)) as opened_backend:
        yield opened_backend


def counted_driver(
    backend: Backend, before: Callable[[int], Awaitable[None]]
) -> tuple[PostgresJobDriver, CountingLanes]:
    """A driver on the backend's statements and wake whose every statement is counted."""
    driver = backend.jobs
    assert isinstance(driver, PostgresJobDriver)
    executor: Executor = driver._x
    lanes = CountingLanes(executor.lanes, before)
    counted = Executor(executor.pool, executor.sql, ManualClock(NOW))
    counted.lanes = cast(Lanes, lanes)
    return PostgresJobDriver(counted, driver._wake), lanes


async def nothing(_: int) -> None:
    return None


@pytest.mark.asyncio
async def test_an_enqueue_that_dedupes_runs_two_statements(backend: Backend) -> None:
    (live,) = await backend.jobs.enqueue([new_job(idempotency_key=KEY)])
    driver, lanes = counted_driver(backend, nothing)
    (again,) = await driver.enqueue([new_job(idempotency_key=KEY)])
    assert (again.job_id, again.deduped) == (live.job_id, True)
    assert len(lanes.statements) == 2


@pytest.mark.asyncio
async def test_a_live_row_that_finishes_and_is_replaced_between_the_inserts_is_answered_by_the_second(
    backend: Backend, schema: str
) -> None:
    jobs = f"{quote_schema(schema)}.jobs"
    (first,) = await backend.jobs.enqueue([new_job(idempotency_key=KEY)])
    replacement = str(uuid.uuid4())
    racer = await asyncpg.connect(server_dsn())
    committer: list[asyncio.Task[None]] = []

    async def commit_once_blocked(tx: asyncpg.transaction.Transaction) -> None:
        # The second statement took its snapshot and waits on the racer's uncommitted row.
        async with session() as watcher:
            for _ in range(500):
                blocked = await watcher.fetchval(
                    "select count(*) from pg_stat_activity where $1 = any(pg_blocking_pids(pid))",
                    racer.get_server_pid(),
                )
                if blocked:
                    break
                await asyncio.sleep(0.01)
        await tx.commit()

    async def race(n: int) -> None:
        if n != 2:
            return
        # The live row the fast path conflicted with finishes ...
        async with session() as conn:
            await conn.execute(
                f"update {jobs} set state = 'completed', finished_at_ms = $2 where id = $1",
                uuid.UUID(first.job_id),
                NOW,
            )
        # ... and a second publisher holds a new live row of the namespace, not yet committed.
        tx = racer.transaction()
        await tx.start()
        await racer.execute(
            f"insert into {jobs} (id, run_id, name, queue, idempotency_key, payload, run_at_ms,"
            " max_attempts, created_at_ms, updated_at_ms)"
            " values ($1, $1, 'test_job', 'default', $2, '{}', $3, 3, $3, $3)",
            uuid.UUID(replacement),
            KEY,
            NOW,
        )
        committer.append(asyncio.create_task(commit_once_blocked(tx)))

    try:
        driver, lanes = counted_driver(backend, race)
        (answer,) = await driver.enqueue([new_job(idempotency_key=KEY)])
        await asyncio.gather(*committer)
    finally:
        await racer.close()
    assert (answer.job_id, answer.deduped) == (replacement, True)
    assert len(lanes.statements) == 2
