"""The Postgres scheduler state and leaders on a real server: the one-statement fire and its fence, leases, advisory locks.

Races are made real rather than hoped for: a third session holds the row (or the insert) the
racers need, both racers are seen waiting on it in `pg_stat_activity`, then it lets go.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from xjobs.clock import ManualClock, SystemClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import LeaderElection, SchedulerState, TaskFire
from xjobs_pg import PostgresAdvisoryLeader, PostgresLeaseLeader, postgres_advisory_leader
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.params import job_arrays
from xjobs_pg.scheduler import PostgresSchedulerState
from xjobs_pg.schema import quote_schema, wake_channel
from xjobs_pg.sql import Statements
from xjobs_pg.testing import (
    QueryLog,
    opened,
    schema_structure,
    server_dsn,
    server_url,
    session,
    slots_named_leases,
)

T = TypeVar("T")
WAIT_S = 10.0
NEW_TABLES = ("leaders", "task_fires", "task_pauses", "task_watermarks")
LIVE = ("ready", "running", "waiting")
WAITING_ON_A_LOCK = """
select count(*) from pg_stat_activity
where wait_event_type = 'Lock' and pid <> pg_backend_pid()
  and length(query) > 0 and left($1, length(query)) = query
"""
ADVISORY_HOLDER = """
select l.pid
from pg_locks l, (select hashtextextended($1, 0) as key) k
where l.locktype = 'advisory' and l.granted and l.objsubid = 1
  and l.classid = ((k.key >> 32) & 4294967295)::oid and l.objid = (k.key & 4294967295)::oid
"""
JOB_ROWS = """
select to_jsonb(j) as row from {schema}.jobs j where j.name = $1 order by j.idempotency_key
"""


dsn = server_dsn


def state_of(backend: Backend) -> SchedulerState:
    assert isinstance(backend.scheduler, PostgresSchedulerState)
    return backend.scheduler


def leader_of(backend: Backend) -> LeaderElection:
    assert isinstance(backend.leader, PostgresLeaseLeader)
    return backend.leader


def sql_of(schema: str) -> Statements:
    return Statements(quote_schema(schema))


def new_job(
    key: str = "k",
    *,
    name: str = "sched.report",
    queue: str = "sched",
    tenant_id: str | None = None,
    run_at_ms: int | None = None,
) -> NewJob:
    return NewJob(
        id=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        name=name,
        queue=queue,
        tenant_id=tenant_id,
        idempotency_key=key,
        payload='{"n": 1}',
        priority=0,
        run_at_ms=run_at_ms,
        max_attempts=3,
        dead_letter=True,
        enqueued_by=None,
        traceparent=None,
    )


def occurrence_job(task: str, occurrence_ms: int, **fields: Any) -> NewJob:
    """The job a scheduler fires: its key scoped to the occurrence, as semantics.md spells it."""
    return new_job(f"{task}:{occurrence_ms}:k", **fields)


async def job_ids(schema: str, name: str = "sched.report") -> list[str]:
    async with session() as conn:
        rows = await conn.fetch(
            f"select id from {quote_schema(schema)}.jobs where name = $1 order by id", name
        )
    return [str(row["id"]) for row in rows]


async def eventually(check: Callable[[], Awaitable[T]], what: str) -> T:
    """Poll `check()` until it answers something truthy; fail naming `what` after `WAIT_S`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not (answer := await check()):
        if loop.time() > deadline:
            raise AssertionError(f"not within {WAIT_S:g} s: {what}")
        await asyncio.sleep(0.005)
    return answer


async def waiting_on_a_lock(sql: str, count: int) -> None:
    """Until `count` sessions running `sql` wait on a lock. Watched from a session of its own:
    inside the holder's open transaction, pg_stat_activity would be one frozen snapshot."""

    async def enough() -> bool:
        async with session() as watcher:
            return bool(await watcher.fetchval(WAITING_ON_A_LOCK, sql) >= count)

    await eventually(enough, f"{count} sessions wait on a lock")


# -- (a) the fire is one statement ------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_fire_is_one_statement_whether_or_not_it_moves(schema: str) -> None:
    log = QueryLog()
    async with opened(schema, on_query=log) as backend:
        state = state_of(backend)
        fire_sql = sql_of(schema)["task_fire"]
        await log.clear()
        assert await state.fire("t", None, 1_000, occurrence_job("t", 1_000)) is True
        assert await log.taken() == [fire_sql]
        await log.clear()
        assert await state.fire("t", 500, 2_000, occurrence_job("t", 2_000)) is False
        assert await log.taken() == [fire_sql]
        assert await state.watermarks(["t"]) == {"t": 1_000}
        assert len(await job_ids(schema)) == 1


@pytest.mark.asyncio
async def test_a_fire_enqueues_and_records_only_when_its_watermark_moves(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        state = state_of(backend)
        first = occurrence_job("t", 1_000)
        assert await state.fire("t", None, 1_000, first) is True
        # previous None refuses an existing row; a stale previous is refused too
        assert await state.fire("t", None, 2_000, occurrence_job("t", 2_000)) is False
        assert await state.fire("t", 999, 2_000, occurrence_job("t", 2_000)) is False
        assert await job_ids(schema) == [first.id]
        assert await state.task_fires() == {"t": TaskFire("t", 1_000, first.id, clock.now_ms())}
        clock.advance(60_000)
        second = occurrence_job("t", 2_000)
        assert await state.fire("t", 1_000, 2_000, second) is True
        assert sorted(await job_ids(schema)) == sorted([first.id, second.id])
        assert await state.watermarks(["t", "never"]) == {"t": 2_000}
        assert await state.task_fires(["t"]) == {
            "t": TaskFire("t", 2_000, second.id, clock.now_ms())
        }


# -- (b) the fence under a real race ------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_fires_racing_on_a_locked_watermark_move_it_once(schema: str) -> None:
    async with opened(schema) as a, opened(schema) as b, session() as holder:
        assert await state_of(a).arm("t", None, 1_000) is True
        jobs = [occurrence_job("t", 2_000), occurrence_job("t", 2_000)]
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            f"select task from {quote_schema(schema)}.task_watermarks where task = 't' for update"
        )
        racers = [
            asyncio.ensure_future(state_of(backend).fire("t", 1_000, 2_000, job))
            for backend, job in zip((a, b), jobs, strict=True)
        ]
        await waiting_on_a_lock(sql_of(schema)["task_fire"], 2)
        await tx.commit()
        moved = await asyncio.gather(*racers)
        assert sorted(moved) == [False, True]
        winner = jobs[moved.index(True)]
        assert await job_ids(schema) == [winner.id]
        assert (await state_of(a).task_fires())["t"].job_id == winner.id
        assert await state_of(b).watermarks(["t"]) == {"t": 2_000}


@pytest.mark.asyncio
async def test_two_first_fires_racing_on_an_uncommitted_insert_move_it_once(schema: str) -> None:
    async with opened(schema) as a, opened(schema) as b, session() as holder:
        jobs = [occurrence_job("t", 1_000), occurrence_job("t", 1_000)]
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            f"insert into {quote_schema(schema)}.task_watermarks (task, watermark_ms) "
            "values ('t', 0)"
        )
        racers = [
            asyncio.ensure_future(state_of(backend).fire("t", None, 1_000, job))
            for backend, job in zip((a, b), jobs, strict=True)
        ]
        await waiting_on_a_lock(sql_of(schema)["task_fire"], 2)
        await tx.rollback()  # the row is free again: both racers insert, one wins
        moved = await asyncio.gather(*racers)
        assert sorted(moved) == [False, True]
        assert await job_ids(schema) == [jobs[moved.index(True)].id]
        assert await state_of(a).watermarks(["t"]) == {"t": 1_000}


@pytest.mark.asyncio
async def test_unsynchronised_fires_of_each_occurrence_from_two_pools_move_it_once(
    schema: str,
) -> None:
    async with opened(schema) as a, opened(schema) as b:
        previous: int | None = None
        for occurrence in range(1_000, 26_000, 1_000):
            moved = await asyncio.gather(
                *(
                    state_of(backend).fire(
                        "t", previous, occurrence, occurrence_job("t", occurrence)
                    )
                    for backend in (a, b)
                )
            )
            assert sorted(moved) == [False, True]
            previous = occurrence
        assert len(await job_ids(schema)) == 25
        assert (await state_of(a).task_fires())["t"].occurrence_ms == 25_000


# -- (c) the job insert mirrors the driver's enqueue ---------------------------------------------


@pytest.mark.asyncio
async def test_a_deduped_fire_records_the_live_jobs_id(schema: str) -> None:
    async with opened(schema) as backend:
        state = state_of(backend)
        live = new_job("t:1000:k", tenant_id="acme")
        (enqueued,) = await backend.jobs.enqueue([live])
        assert await state.fire("t", None, 1_000, new_job("t:1000:k", tenant_id="acme")) is True
        assert await job_ids(schema) == [enqueued.job_id]
        assert (await state.task_fires())["t"].job_id == enqueued.job_id
        # another tenant is another namespace
        other = new_job("t:2000:k", tenant_id="other")
        await backend.jobs.enqueue([new_job("t:2000:k", tenant_id="acme")])
        assert await state.fire("t", 1_000, 2_000, other) is True
        assert (await state.task_fires())["t"].job_id == other.id


@pytest.mark.asyncio
async def test_a_fire_whose_job_id_names_a_finished_job_records_that_job(schema: str) -> None:
    async with opened(schema) as backend:
        state = state_of(backend)
        job = occurrence_job("t", 1_000)
        await backend.jobs.enqueue([job])
        await backend.jobs.cancel(job.id)
        assert await state.fire("t", None, 1_000, replace(job, idempotency_key="fresh")) is True
        assert await job_ids(schema) == [job.id]
        assert (await state.task_fires())["t"].job_id == job.id


@pytest.mark.asyncio
async def test_a_live_duplicate_committed_during_the_fire_reruns_it_and_records_that_job(
    schema: str,
) -> None:
    log = QueryLog()
    async with opened(schema, on_query=log) as backend, session() as holder:
        state = state_of(backend)
        sql = sql_of(schema)
        rival = occurrence_job("t", 1_000)
        tx = holder.transaction()
        await tx.start()
        enqueue_args = job_arrays([rival])
        await holder.fetch(sql["enqueue"], *enqueue_args, None, [], wake_channel(schema))
        await log.clear()
        firing = asyncio.ensure_future(state.fire("t", None, 1_000, occurrence_job("t", 1_000)))
        await waiting_on_a_lock(sql["task_fire"], 1)
        await tx.commit()
        assert await firing is True
        # the first run could not see the rival and rolled back whole; the second recorded it
        assert await log.taken() == [sql["task_fire"], sql["task_fire"]]
        assert await job_ids(schema) == [rival.id]
        assert (await state.task_fires())["t"].job_id == rival.id
        assert await state.watermarks(["t"]) == {"t": 1_000}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"tenant_id": "acme", "run_at_ms": 1_767_225_900_000},
        {"priority": -3, "max_attempts": 1, "dead_letter": False},
        {"enqueued_by": "task:nightly", "traceparent": "00-abc-def-01", "payload": '{"a": [1]}'},
    ],
    ids=["plain", "tenant-and-later", "priority-and-attempts", "origin-and-payload"],
)
@pytest.mark.asyncio
async def test_a_fire_inserts_the_row_the_drivers_enqueue_inserts(
    schema: str, other_schema: str, fields: dict[str, Any]
) -> None:
    job = replace(new_job("t:1000:k"), **fields)
    clock = ManualClock()
    async with opened(schema, clock) as enqueued, opened(other_schema, clock) as fired:
        await enqueued.jobs.enqueue([job])
        assert await state_of(fired).fire("t", None, 1_000, job) is True
        async with session() as conn:
            rows = [
                [
                    r["row"]
                    for r in await conn.fetch(JOB_ROWS.format(schema=quote_schema(s)), job.name)
                ]
                for s in (schema, other_schema)
            ]
    assert len(rows[0]) == 1
    assert rows[0] == rows[1]


@pytest.mark.asyncio
async def test_a_fire_wakes_its_queue_as_an_enqueue_does_and_a_refused_fire_never(
    schema: str,
) -> None:
    channel = wake_channel(schema)
    heard: list[str] = []
    async with opened(schema) as backend, session() as listener:
        await listener.add_listener(channel, lambda *args: heard.append(str(args[3])))
        state = state_of(backend)
        assert await state.fire("t", None, 1_000, occurrence_job("t", 1_000, queue="q1")) is True
        assert await state.fire("t", 5, 2_000, occurrence_job("t", 2_000, queue="q2")) is False
        later = occurrence_job("u", 1_000, queue="q3", run_at_ms=2**53 - 1)
        assert await state.fire("u", None, 1_000, later) is True
        marker = f"marker:{secrets.token_hex(4)}"
        await listener.execute("select pg_notify($1, $2)", channel, marker)

        async def marked() -> bool:
            return marker in heard

        await eventually(marked, "the marker is heard")
    assert heard[: heard.index(marker)] == ["q1"]


# -- (d) arm, task fires, pauses ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_arm_is_a_compare_and_set_that_never_enqueues_or_records(schema: str) -> None:
    log = QueryLog()
    async with opened(schema, on_query=log) as backend:
        state = state_of(backend)
        await log.clear()
        assert await state.arm("t", None, 100) is True
        assert await log.taken() == [sql_of(schema)["task_arm"]]
        assert await state.arm("t", None, 200) is False
        assert await state.arm("t", 50, 300) is False
        assert await state.arm("t", 100, 300) is True
        assert await state.arm("t", 100, 400) is False
        assert await state.watermarks(["t", "u"]) == {"t": 300}
        assert await state.arm("u", 7, 8) is False  # no row: only previous None arms it
        assert await state.watermarks(["u"]) == {}
        assert await state.task_fires() == {}
        assert await job_ids(schema) == []


@pytest.mark.asyncio
async def test_two_arms_racing_on_a_locked_watermark_move_it_once(schema: str) -> None:
    async with opened(schema) as a, opened(schema) as b, session() as holder:
        assert await state_of(a).arm("t", None, 1_000) is True
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            f"select task from {quote_schema(schema)}.task_watermarks where task = 't' for update"
        )
        racers = [
            asyncio.ensure_future(state_of(backend).arm("t", 1_000, target))
            for backend, target in ((a, 2_000), (b, 3_000))
        ]
        await waiting_on_a_lock(sql_of(schema)["task_arm"], 2)
        await tx.commit()
        moved = await asyncio.gather(*racers)
        assert sorted(moved) == [False, True]
        assert await state_of(a).watermarks(["t"]) == {"t": (2_000, 3_000)[moved.index(True)]}


@pytest.mark.asyncio
async def test_task_fires_names_the_last_dispatch_of_each_task_never_an_arm(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        state = state_of(backend)
        a1, b1 = occurrence_job("a", 1_000), occurrence_job("b", 1_000, name="sched.other")
        assert await state.fire("a", None, 1_000, a1) is True
        at_a1 = clock.now_ms()
        clock.advance(5)
        assert await state.fire("b", None, 1_000, b1) is True
        assert await state.arm("c", None, 9_000) is True
        assert await state.arm("a", 1_000, 5_000) is True  # a skip moves the watermark only
        everything = await state.task_fires()
        assert everything == {
            "a": TaskFire("a", 1_000, a1.id, at_a1),
            "b": TaskFire("b", 1_000, b1.id, clock.now_ms()),
        }
        assert await state.task_fires(["a", "c", "nope"]) == {"a": everything["a"]}
        assert await state.task_fires([]) == {}


@pytest.mark.asyncio
async def test_pause_and_resume_answer_the_change_and_keep_the_watermark(schema: str) -> None:
    async with opened(schema) as backend:
        state = state_of(backend)
        assert await state.arm("t", None, 1_000) is True
        assert await state.paused(["t", "u"]) == set()
        assert await state.pause("t") is True
        assert await state.pause("t") is False
        assert await state.paused(["t", "u"]) == {"t"}
        assert await state.watermarks(["t"]) == {"t": 1_000}
        assert await state.resume("t") is True
        assert await state.resume("t") is False
        assert await state.resume("never") is False
        assert await state.paused(["t"]) == set()
        assert await state.watermarks(["t"]) == {"t": 1_000}


# -- (e) the lease leader (the backend's default) -------------------------------------------------


@pytest.mark.asyncio
async def test_the_lease_leader_is_exclusive_until_it_lapses_or_is_released(schema: str) -> None:
    clock = ManualClock()
    log = QueryLog()
    async with opened(schema, clock, on_query=log) as a, opened(schema, clock) as b:
        la, lb = leader_of(a), leader_of(b)
        await log.clear()
        assert await la.acquire("alpha", 1_000) is True
        assert await log.taken() == [sql_of(schema)["leader_acquire"]]
        assert await lb.acquire("beta", 1_000) is False
        clock.advance(999)
        assert await la.acquire("alpha", 1_000) is True  # renewed: expires at +1999
        clock.advance(999)
        assert await lb.acquire("beta", 1_000) is False
        clock.advance(1)
        assert await lb.acquire("beta", 1_000) is True  # lapsed: taken over
        assert await la.acquire("alpha", 1_000) is False
        await la.release("alpha")  # not the holder: a no-op
        assert await la.acquire("alpha", 1_000) is False
        await lb.release("beta")
        assert await la.acquire("alpha", 1_000) is True


@pytest.mark.asyncio
async def test_many_candidates_racing_for_a_free_lease_elect_exactly_one(schema: str) -> None:
    async with opened(schema) as a, opened(schema) as b:
        leaders = [leader_of(a), leader_of(b)]
        for round_ in range(10):
            won = await asyncio.gather(
                *(leaders[i % 2].acquire(f"c{round_}-{i}", 30_000) for i in range(8))
            )
            assert won.count(True) == 1
            await leaders[0].release(f"c{round_}-{won.index(True)}")


@pytest.mark.asyncio
async def test_the_lease_leader_on_the_server_clock_lapses_after_its_ttl(schema: str) -> None:
    async with opened(schema, SystemClock()) as backend:
        leader = leader_of(backend)
        assert await leader.acquire("alpha", 300) is True
        assert await leader.acquire("beta", 300) is False

        async def beta_leads() -> bool:
            return await leader.acquire("beta", 300)

        await eventually(beta_leads, "beta takes the lapsed lease")
        assert await leader.acquire("alpha", 300) is False


# -- (f) the advisory leader -------------------------------------------------------------------------


@asynccontextmanager
async def advisory_pair(key: str) -> AsyncIterator[tuple[PostgresAdvisoryLeader, ...]]:
    leaders = (
        postgres_advisory_leader(server_url(), key=key),
        postgres_advisory_leader(server_url(), key=key),
    )
    try:
        yield leaders
    finally:
        for leader, candidate in zip(leaders, ("alpha", "beta"), strict=True):
            await leader.release(candidate)


async def holders(key: str) -> list[int]:
    async with session() as conn:
        return [row["pid"] for row in await conn.fetch(ADVISORY_HOLDER, key)]


@pytest.mark.asyncio
async def test_two_advisory_leaders_elect_one_and_a_release_hands_over() -> None:
    key = f"xjobs_t_{secrets.token_hex(6)}"
    async with advisory_pair(key) as (a, b):
        assert await a.acquire("alpha", 1_000) is True
        assert await b.acquire("beta", 1_000) is False
        for _ in range(3):
            assert await a.acquire("alpha", 1_000) is True  # a renewal does not lock twice
        assert await a.acquire("gamma", 1_000) is False  # one instance, one holder
        assert len(await holders(key)) == 1
        await a.release("gamma")  # not the holder: a no-op
        assert await b.acquire("beta", 1_000) is False
        await a.release("alpha")
        assert await holders(key) == []
        assert await b.acquire("beta", 1_000) is True
        assert await a.acquire("alpha", 1_000) is False


@pytest.mark.asyncio
async def test_killing_the_advisory_leaders_session_hands_leadership_to_the_other() -> None:
    key = f"xjobs_t_{secrets.token_hex(6)}"
    async with advisory_pair(key) as (a, b), session() as admin:
        assert await a.acquire("alpha", 1_000) is True
        (pid,) = await holders(key)
        assert await admin.fetchval("select pg_terminate_backend($1)", pid) is True

        async def beta_leads() -> bool:
            return await b.acquire("beta", 1_000)

        await eventually(beta_leads, "beta takes the lock the killed session held")
        assert await a.acquire("alpha", 1_000) is False  # the dead session: leadership lost
        assert await a.acquire("alpha", 1_000) is False  # reconnected, and beta holds it
        (new_pid,) = await holders(key)
        assert new_pid != pid
        await b.release("beta")
        assert await a.acquire("alpha", 1_000) is True


@pytest.mark.asyncio
async def test_an_advisory_leaders_default_key_is_its_urls_schema() -> None:
    url = server_url()
    sep = "&" if "?" in url else "?"
    schemas = [f"xjobs_t_{secrets.token_hex(6)}" for _ in range(2)]
    a, b, c = (
        postgres_advisory_leader(f"{url}{sep}xjobs_schema={s}") for s in (*schemas, schemas[0])
    )
    try:
        assert await a.acquire("alpha", 1_000) is True
        assert await b.acquire("beta", 1_000) is True  # another schema, another lock
        assert await c.acquire("gamma", 1_000) is False
        assert len(await holders(f"{schemas[0]}.scheduler")) == 1
    finally:
        await a.release("alpha")
        await b.release("beta")
        await c.release("gamma")


# -- (g) the upgrade from the previous schema version ----------------------------------------------


@pytest.mark.asyncio
async def test_opening_a_version_2_schema_adds_the_scheduler_tables(
    schema: str, other_schema: str
) -> None:
    assert SCHEMA_VERSION >= 3
    quoted = quote_schema(schema)
    job = new_job()
    async with opened(schema) as backend:
        await backend.jobs.enqueue([job])
    async with opened(other_schema):
        pass
    async with session() as conn:
        # version 2 as it shipped: everything but the scheduler tables (and the outbox), the
        # slots under their old name
        for table in (*NEW_TABLES, "outbox"):
            await conn.execute(f"drop table {quoted}.{table}")
        await slots_named_leases(conn, schema)
        await conn.execute(f"update {quoted}.schema_version set version = 2")
    async with opened(schema) as backend:
        assert await state_of(backend).arm("t", None, 1) is True
        assert await leader_of(backend).acquire("alpha", 1_000) is True
        assert (await backend.jobs.get(job.id)) is not None
    async with session() as conn:
        assert await conn.fetchval(f"select version from {quoted}.schema_version") == SCHEMA_VERSION
        assert await schema_structure(conn, schema) == await schema_structure(conn, other_schema)


@pytest.mark.asyncio
async def test_the_advisory_acquire_never_stacks_the_lock_it_holds() -> None:
    sql = sql_of("xjobs")
    keys = [f"xjobs_t_{secrets.token_hex(6)}:{i}" for i in range(16)]
    async with session() as conn:
        signs = {await conn.fetchval("select hashtextextended($1, 0) < 0", k) for k in keys}
        assert signs == {True, False}  # the key's high half is matched with and without its sign
        for key in keys:
            for _ in range(3):
                assert await conn.fetchval(sql["advisory_acquire"], key) is True
            assert len(await holders(key)) == 1
            assert await conn.fetchval(sql["advisory_release"], key) is True
            assert await holders(key) == []
