"""The operator surface on a real server, where Postgres differs from the memory backend: sharded
counters summed on read, a batch counted in one upsert a name, a rollup raced by a second
leader, the version 5 upgrade, what a remove takes along, and the wake of a resume."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import BatchAck, Claim, ClaimOptions
from xjobs.contract.introspection import (
    MAX_ERROR_HISTORY,
    MINUTE_MS,
    JobFilter,
    JobIntrospection,
    JobPosition,
)
from xjobs.contract.stores import EventWait
from xjobs.errors import JobPageInvalidError
from xjobs.run.settle import ending
from xjobs.testing.rows import new_job
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.schema import quote_schema, wake_channel
from xjobs_pg.sql import read_sql
from xjobs_pg.testing import opened, schema_structure, session

QUEUE = "ops"
NOW = 1_700_000_000_000


@pytest_asyncio.fixture
async def backend(schema: str) -> AsyncIterator[Backend]:
    async with opened(schema, ManualClock(NOW)) as opened_backend:
        yield opened_backend


def ops_of(backend: Backend) -> JobIntrospection:
    assert backend.introspection is not None
    return backend.introspection


async def claimed(backend: Backend, n: int, **overrides: object) -> list[Claim]:
    jobs = [new_job(queue=QUEUE, **overrides) for _ in range(n)]  # type: ignore[arg-type]
    await backend.jobs.enqueue(jobs)
    result = await backend.jobs.claim(ClaimOptions("worker-a", {QUEUE: n}, 30_000))
    assert len(result.jobs) == n
    return [job.claim for job in result.jobs]


def batch_ack(backend: Backend) -> BatchAck:
    assert isinstance(backend.jobs, BatchAck)
    return backend.jobs


# -- the fragments keep the contract's numbers -------------------------------------------------


def test_the_minute_bucket_in_the_settles_is_the_contracts_minute() -> None:
    fragment = read_sql("ledger.sql").split("-- fragment: count_minute", 1)[1]
    assert re.findall(r"now_ms % (\d+)", fragment.split("-- fragment:", 1)[0]) == [str(MINUTE_MS)]


def test_the_error_history_keeps_the_contracts_bound() -> None:
    fragment = read_sql("ledger.sql").split("-- fragment: error_history", 1)[1]
    (offset,) = re.findall(r"offset (\d+) limit 1", fragment.split("-- name:", 1)[0])
    assert int(offset) == MAX_ERROR_HISTORY - 1


# -- counters ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_acks_on_many_connections_at_once_sum_over_the_shards(
    backend: Backend, schema: str
) -> None:
    claims = await claimed(backend, 40)
    assert all(await asyncio.gather(*(backend.jobs.ack(c) for c in claims)))
    buckets = await ops_of(backend).counters("minute", 0)
    async with session() as conn:
        shards = await conn.fetchval(
            f"select count(*) from {quote_schema(schema)}.counters where tier = 'minute'"
        )
    assert [(b.name, b.outcome, b.count) for b in buckets] == [("test_job", "completed", 40)]
    assert 1 <= shards <= 8


@pytest.mark.asyncio
async def test_a_batched_ack_counts_each_name_once(backend: Backend) -> None:
    claims = await claimed(backend, 3, name="alpha") + await claimed(backend, 2, name="beta")
    assert await batch_ack(backend).ack_many(claims) == [True] * 5
    buckets = await ops_of(backend).counters("minute", 0)
    assert [(b.name, b.count) for b in buckets] == [("alpha", 3), ("beta", 2)]


@pytest.mark.asyncio
async def test_two_rollups_at_once_fold_each_minute_once(backend: Backend) -> None:
    clock = backend.clock
    assert isinstance(clock, ManualClock)
    for _ in range(3):
        claims = await claimed(backend, 2)
        await batch_ack(backend).ack_many(claims)
        clock.advance(MINUTE_MS)
    ops = ops_of(backend)
    folded = await asyncio.gather(*(ops.rollup_counters(clock.now_ms()) for _ in range(2)))
    hours = await ops.counters("hour", 0)
    assert sorted(folded) == [0, 3]
    assert sum(b.count for b in hours) == 6


# -- the upgrade -------------------------------------------------------------------------------

AS_VERSION_5 = """
drop table {schema}.attempt_errors, {schema}.counters, {schema}.counter_folds, {schema}.pauses;
drop index {schema}.jobs_listed;
create index jobs_finished on {schema}.jobs (state, created_at_ms, id)
    where state in ('completed', 'failed', 'dead', 'cancelled');
update {schema}.schema_version set version = 5;
"""


@pytest.mark.asyncio
async def test_opening_a_version_5_schema_adds_the_operator_tables_and_index(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        job = new_job(queue=QUEUE)
        await old.jobs.enqueue([job])
    async with session() as conn:
        await conn.execute(AS_VERSION_5.format(schema=quote_schema(schema)))
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            assert await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        listed = await ops_of(upgraded).list_jobs(JobFilter(), limit=5, after=None)
    assert (version, [j.id for j in listed]) == (SCHEMA_VERSION, [job.id])


# -- one job -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_remove_takes_the_event_wait_and_every_error_along(
    backend: Backend, schema: str
) -> None:
    (claim,) = await claimed(backend, 1)
    job_id = claim.job_id
    record = await backend.jobs.get(job_id)
    assert record is not None
    wait = EventWait(job_id, record.run_id, QUEUE, "wait", "paid", "{}", NOW, None)
    async with session() as conn:
        await conn.execute(
            f"insert into {quote_schema(schema)}.event_waits (job_id, run_id, queue, step, event,"
            " match, since_ms, deadline_ms) values ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)",
            wait.job_id,
            wait.run_id,
            wait.queue,
            wait.step,
            wait.event,
            wait.match,
            wait.since_ms,
            wait.deadline_ms,
        )
    await backend.jobs.nack(claim, ending(True, "E: gone"))
    move = await ops_of(backend).remove(job_id)
    async with session() as conn:
        left = await conn.fetchval(
            f"select (select count(*) from {quote_schema(schema)}.event_waits)"
            f" + (select count(*) from {quote_schema(schema)}.attempt_errors)"
        )
    assert (move.status, left) == ("done", 0)


@pytest.mark.asyncio
async def test_a_position_that_names_no_postgres_job_is_refused(backend: Backend) -> None:
    with pytest.raises(JobPageInvalidError):
        await ops_of(backend).list_jobs(JobFilter(), limit=5, after=JobPosition(NOW, "job-1"))


# -- the wake ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_resuming_a_queue_notifies_it(backend: Backend, schema: str) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    ops = ops_of(backend)
    await ops.pause("queue", QUEUE)
    async with session() as conn:
        await conn.add_listener(wake_channel(schema), lambda *args: heard.put_nowait(args[3]))
        assert await ops.resume("queue", QUEUE) is True
        payload = await asyncio.wait_for(heard.get(), timeout=5)
    assert payload == QUEUE
