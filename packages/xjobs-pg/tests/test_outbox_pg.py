"""The Postgres outbox on a real server: staged in the caller's transaction, leased, fenced, purged, and its wake.

A wake's absence is shown without sleeping: a marker notified on the same channel from another
session arrives after everything notified before it.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

import asyncpg
import psycopg
import pytest

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.contract.stores import OUTBOX_WAKE
from xjobs.errors import OutboxConnectionInvalidError
from xjobs_pg import wake_slots
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.outbox import OUTBOX_PURGE_LIMIT, OUTBOX_RETENTION_MS, PostgresOutboxStore
from xjobs_pg.schema import quote_schema, wake_channel
from xjobs_pg.sql import Statements
from xjobs_pg.testing import (
    QueryLog,
    opened,
    schema_structure,
    server_dsn,
    session,
    slots_named_leases,
)
from xjobs_pg.wake_slots import WAKE_SLOT_MS

Kind = Literal["psycopg", "psycopg-async", "asyncpg"]
KINDS: tuple[Kind, ...] = ("psycopg", "psycopg-async", "asyncpg")
WAIT_S = 10.0
LEASE_MS = 30_000
HOUR_MS = 3_600_000

dsn = server_dsn


class Heard:
    """Every payload a listener got, in order (`None`: re-scan every queue)."""

    def __init__(self) -> None:
        self.wakes: list[str | None] = []

    def __call__(self, payload: str | None) -> None:
        self.wakes.append(payload)

    def on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self.wakes.append(str(payload))

    def before(self, marker: str) -> list[str | None]:
        return self.wakes[: self.wakes.index(marker)]


def new_job(queue: str = "mail", *, run_at_ms: int | None = None, **fields: Any) -> NewJob:
    job = NewJob(
        id=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        name="outbox.receipt",
        queue=queue,
        tenant_id=None,
        idempotency_key=secrets.token_hex(8),
        payload='{"order": 1}',
        priority=0,
        run_at_ms=run_at_ms,
        max_attempts=3,
        dead_letter=True,
        enqueued_by=None,
        traceparent=None,
    )
    return replace(job, **fields)


def outbox_of(backend: Backend) -> PostgresOutboxStore:
    assert isinstance(backend.outbox, PostgresOutboxStore)
    return backend.outbox


def wake_of(backend: Backend) -> WakeSource:
    assert backend.wake is not None
    return backend.wake


async def answered(
    staged: list[EnqueueResult] | Awaitable[list[EnqueueResult]],
) -> list[EnqueueResult]:
    """The results of an async connection's stage (an awaitable, never a list)."""
    assert not isinstance(staged, list)
    return await staged


async def stage_in_transaction(
    kind: Kind, outbox: PostgresOutboxStore, rows: list[NewJob], *, commit: bool
) -> list[EnqueueResult]:
    """Stage `rows` on a fresh connection of `kind` inside an explicit transaction, then end it."""
    if kind == "psycopg":
        with psycopg.connect(dsn()) as sync_conn:
            with sync_conn.transaction() as tx:
                results = outbox.stage_on(sync_conn, rows)
                if not commit:
                    raise psycopg.Rollback(tx)
            assert isinstance(results, list)
            return results
    if kind == "psycopg-async":
        async with await psycopg.AsyncConnection.connect(dsn()) as async_conn:
            async with async_conn.transaction() as atx:
                results = await answered(outbox.stage_on(async_conn, rows))
                if not commit:
                    raise psycopg.Rollback(atx)
            return results
    async with session() as conn:
        transaction = conn.transaction()
        await transaction.start()
        results = await answered(outbox.stage_on(conn, rows))
        await (transaction.commit() if commit else transaction.rollback())
        return results


async def eventually(check: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {WAIT_S:g} s: {what}")
        await asyncio.sleep(0.002)


async def subscribed(backend: Backend) -> Heard:
    """A relay-side subscriber on `backend`'s wake, returned once a probe proved the wake."""
    heard = Heard()
    wake = wake_of(backend)
    wake.subscribe(heard)
    await eventually(lambda: wake.live, "the wake is proven live")
    return heard


async def mark(channel: str, heard: Heard) -> str:
    """Notify a marker from another session and wait for it: everything sent before it arrived."""
    marker = f"marker:{secrets.token_hex(4)}"
    async with session() as conn:
        await conn.execute("select pg_notify($1, $2)", channel, marker)
    await eventually(lambda: marker in heard.wakes, f"the marker {marker} is heard")
    return marker


async def outbox_rows(schema: str) -> int:
    async with session() as conn:
        count = await conn.fetchval(f"select count(*) from {quote_schema(schema)}.outbox")
    return int(count)


def ids(rows: list[NewJob]) -> list[str]:
    return [row.id for row in rows]


# -- (a) a stage commits and rolls back with the caller's transaction --------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_committed_stage_is_claimable_with_every_column_it_staged(
    schema: str, kind: Kind
) -> None:
    rows = [
        new_job(),
        new_job(
            "reports",
            tenant_id="org-1",
            priority=3,
            run_at_ms=1_000,
            max_attempts=7,
            dead_letter=False,
            enqueued_by="user:1",
            traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01",
            payload='{"a": [1, "x"], "b": null}',
        ),
    ]
    async with opened(schema) as backend:
        outbox = outbox_of(backend)
        results = await stage_in_transaction(kind, outbox, rows, commit=True)
        claimed = await outbox.claim("relay-a", 10, LEASE_MS)
    assert results == [EnqueueResult(r.id, r.run_id, deduped=False) for r in rows]
    assert sorted(claimed, key=lambda r: r.id) == sorted(rows, key=lambda r: r.id)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_rolled_back_stage_leaves_nothing_ever(schema: str, kind: Kind) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        outbox = outbox_of(backend)
        results = await stage_in_transaction(kind, outbox, [new_job()], commit=False)
        assert len(results) == 1
        assert await outbox.claim("relay-a", 10, LEASE_MS) == []
        clock.advance(LEASE_MS + HOUR_MS)
        assert await outbox.claim("relay-a", 10, LEASE_MS) == []
        assert await outbox.pending() == 0
    assert await outbox_rows(schema) == 0


@pytest.mark.asyncio
async def test_an_asyncpg_stage_outside_an_explicit_transaction_commits_at_once(
    schema: str,
) -> None:
    job = new_job()
    async with opened(schema) as backend, session() as conn:
        await answered(outbox_of(backend).stage_on(conn, [job]))
        assert not conn.is_in_transaction()
        assert ids(await outbox_of(backend).claim("relay-a", 10, LEASE_MS)) == [job.id]


@pytest.mark.asyncio
async def test_a_stage_through_a_pool_connection_proxy_joins_its_transaction(
    schema: str,
) -> None:
    pool = await asyncpg.create_pool(dsn(), min_size=1, max_size=1)
    try:
        async with opened(schema) as backend:
            outbox = outbox_of(backend)
            async with pool.acquire() as conn:
                transaction = conn.transaction()
                await transaction.start()
                await answered(outbox.stage_on(conn, [new_job()]))
                await transaction.rollback()
            assert await outbox.pending() == 0
    finally:
        await pool.close()


@pytest.mark.asyncio
async def test_the_stores_own_stage_commits_before_it_answers(schema: str) -> None:
    job = new_job()
    async with opened(schema) as backend:
        results = await outbox_of(backend).stage([job])
        assert results == [EnqueueResult(job.id, job.run_id, deduped=False)]
        assert ids(await outbox_of(backend).claim("relay-a", 10, LEASE_MS)) == [job.id]


@pytest.mark.asyncio
async def test_a_stage_writes_to_the_backends_schema_whatever_the_connections_search_path(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as backend, opened(other_schema), session() as conn:
        await conn.execute(f"set search_path to {quote_schema(other_schema)}")
        await answered(outbox_of(backend).stage_on(conn, [new_job()]))
    assert (await outbox_rows(schema), await outbox_rows(other_schema)) == (1, 0)


@pytest.mark.asyncio
async def test_stage_many_on_asyncpg_is_one_statement(schema: str) -> None:
    rows = [new_job() for _ in range(5)]
    log = QueryLog()
    async with opened(schema) as backend, session() as conn:
        conn.add_query_logger(log)
        async with conn.transaction():
            results = await answered(outbox_of(backend).stage_on(conn, rows))
        stage_sql = Statements(quote_schema(schema))["outbox_stage"]
        assert [q for q in await log.taken() if q == stage_sql] == [stage_sql]
        assert [q for q in await log.taken() if q != stage_sql and "outbox" in q] == []
        assert [r.job_id for r in results] == ids(rows)
        assert sorted(ids(await outbox_of(backend).claim("relay-a", 10, LEASE_MS))) == sorted(
            ids(rows)
        )


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["psycopg", "psycopg-async"])
async def test_stage_many_on_psycopg_stages_every_row_in_order(schema: str, kind: Kind) -> None:
    rows = [new_job(run_at_ms=n) for n in range(5)]
    async with opened(schema) as backend:
        results = await stage_in_transaction(kind, outbox_of(backend), rows, commit=True)
        claimed = await outbox_of(backend).claim("relay-a", 10, LEASE_MS)
    assert [r.job_id for r in results] == ids(rows)
    assert sorted(ids(claimed)) == sorted(ids(rows))


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_staging_nothing_answers_nothing(schema: str, kind: Kind) -> None:
    async with opened(schema) as backend:
        assert await stage_in_transaction(kind, outbox_of(backend), [], commit=True) == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "conn",
    [object(), "postgresql://somewhere/db", None],
    ids=["object", "url", "none"],
)
async def test_a_connection_of_an_unknown_kind_is_refused_naming_its_type(
    schema: str, conn: object
) -> None:
    async with opened(schema) as backend:
        with pytest.raises(OutboxConnectionInvalidError) as refused:
            outbox_of(backend).stage_on(conn, [new_job()])
        assert await outbox_of(backend).pending() == 0
    assert refused.value.code == "XJOBS_OUTBOX_CONNECTION_INVALID"
    assert type(conn).__qualname__ in str(refused.value)


@pytest.mark.asyncio
async def test_an_asyncpg_pool_is_not_a_callers_connection(schema: str) -> None:
    pool = await asyncpg.create_pool(dsn(), min_size=1, max_size=1)
    try:
        async with opened(schema) as backend:
            with pytest.raises(OutboxConnectionInvalidError) as refused:
                outbox_of(backend).stage_on(pool, [new_job()])
    finally:
        await pool.close()
    assert "Pool" in str(refused.value)


# -- (b) the claim is a lease, oldest staged first ---------------------------------------------


@pytest.mark.asyncio
async def test_a_claim_is_one_statement_and_takes_the_oldest_staged_first(schema: str) -> None:
    clock = ManualClock()
    log = QueryLog()
    async with opened(schema, clock, on_query=log) as backend:
        outbox = outbox_of(backend)
        staged = []
        for _ in range(3):
            staged.append(new_job())
            await outbox.stage([staged[-1]])
            clock.advance(1)
        await log.clear()
        claimed = await outbox.claim("relay-a", 2, LEASE_MS)
        assert await log.taken() == [Statements(quote_schema(schema))["outbox_claim"]]
    assert ids(claimed) == ids(staged[:2])


@pytest.mark.asyncio
async def test_a_claim_skips_rows_another_relay_leased(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        outbox = outbox_of(backend)
        first, second = new_job(), new_job()
        await outbox.stage([first])
        clock.advance(1)
        await outbox.stage([second])
        assert ids(await outbox.claim("relay-a", 1, LEASE_MS)) == [first.id]
        assert ids(await outbox.claim("relay-b", 10, LEASE_MS)) == [second.id]
        assert await outbox.claim("relay-c", 10, LEASE_MS) == []


@pytest.mark.asyncio
async def test_a_claim_retakes_a_lapsed_lease(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        outbox = outbox_of(backend)
        job = new_job()
        await outbox.stage([job])
        assert ids(await outbox.claim("relay-a", 10, 1_000)) == [job.id]
        clock.advance(999)
        assert await outbox.claim("relay-b", 10, 1_000) == []
        clock.advance(1)
        assert ids(await outbox.claim("relay-b", 10, 1_000)) == [job.id]


@pytest.mark.asyncio
async def test_a_claim_of_no_rows_asks_nothing(schema: str) -> None:
    log = QueryLog()
    async with opened(schema, on_query=log) as backend:
        await outbox_of(backend).stage([new_job()])
        await log.clear()
        assert await outbox_of(backend).claim("relay-a", 0, LEASE_MS) == []
        assert await log.taken() == []


@pytest.mark.asyncio
async def test_two_relays_claiming_at_once_from_two_pools_get_disjoint_rows(schema: str) -> None:
    rows = [new_job() for _ in range(60)]
    async with opened(schema) as a, opened(schema) as b:
        await outbox_of(a).stage(rows)
        taken: list[str] = []
        for _ in range(20):
            got = await asyncio.gather(
                *(outbox_of(x).claim(f"relay-{n}", 7, LEASE_MS) for n, x in enumerate((a, b, a, b)))
            )
            taken.extend(row.id for batch in got for row in batch)
            if len(set(taken)) == len(rows):
                break
    assert len(taken) == len(set(taken))  # no row leased twice
    assert sorted(taken) == sorted(ids(rows))


# -- (c) the mark is fenced on the lease, and purges what retention let go -----------------------


@pytest.mark.asyncio
async def test_a_mark_by_a_relay_whose_lease_was_retaken_marks_nothing(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        outbox = outbox_of(backend)
        job = new_job()
        await outbox.stage([job])
        await outbox.claim("relay-a", 10, 1_000)
        clock.advance(1_000)
        assert ids(await outbox.claim("relay-b", 10, 1_000)) == [job.id]
        assert await outbox.mark_published("relay-a", [job.id]) == 0
        assert await outbox.pending() == 1
        assert await outbox.mark_published("relay-b", [job.id]) == 1
        assert await outbox.pending() == 0


@pytest.mark.asyncio
async def test_a_lapsed_lease_nobody_retook_is_still_marked_by_its_relay(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema, clock) as backend:
        outbox = outbox_of(backend)
        job = new_job()
        await outbox.stage([job])
        await outbox.claim("relay-a", 10, 1_000)
        clock.advance(5_000)
        assert await outbox.mark_published("relay-a", [job.id, job.id]) == 1
        assert await outbox.mark_published("relay-a", [job.id]) == 0  # published once
        assert await outbox.claim("relay-b", 10, 1_000) == []


@pytest.mark.asyncio
async def test_a_mark_is_one_statement_and_purges_old_published_rows_a_bounded_number_at_a_time(
    schema: str,
) -> None:
    clock = ManualClock()
    log = QueryLog()
    old = [new_job() for _ in range(OUTBOX_PURGE_LIMIT + 3)]
    async with opened(schema, clock, on_query=log) as backend:
        outbox = outbox_of(backend)
        await outbox.stage(old)
        claimed = await outbox.claim("relay-a", len(old), LEASE_MS)
        assert await outbox.mark_published("relay-a", ids(claimed)) == len(old)

        async def publish_one() -> None:
            job = new_job()
            await outbox.stage([job])
            await outbox.claim("relay-a", 10, LEASE_MS)
            await log.clear()
            assert await outbox.mark_published("relay-a", [job.id]) == 1
            assert await log.taken() == [Statements(quote_schema(schema))["outbox_mark"]]

        clock.advance(OUTBOX_RETENTION_MS)  # not older than the retention yet
        await publish_one()
        assert await outbox_rows(schema) == len(old) + 1
        clock.advance(1)
        await publish_one()
        assert await outbox_rows(schema) == 3 + 2  # the bound: at most the limit per mark
        await publish_one()
        assert await outbox_rows(schema) == 3
        assert await outbox.pending() == 0


@pytest.mark.asyncio
async def test_pending_counts_unpublished_rows_claimed_or_not(schema: str) -> None:
    async with opened(schema) as backend:
        outbox = outbox_of(backend)
        assert await outbox.pending() == 0
        await outbox.stage([new_job() for _ in range(3)])
        claimed = await outbox.claim("relay-a", 1, LEASE_MS)
        assert await outbox.pending() == 3
        await outbox.mark_published("relay-a", ids(claimed))
        assert await outbox.pending() == 2


# -- (d) the stage wake ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_relay_side_subscriber_hears_the_stage_wake_only_after_commit(
    schema: str,
) -> None:
    async with opened(schema) as relay_side, opened(schema) as staging, session() as conn:
        heard = await subscribed(relay_side)
        transaction = conn.transaction()
        await transaction.start()
        await answered(outbox_of(staging).stage_on(conn, [new_job()]))
        marker = await mark(wake_channel(schema), heard)
        assert OUTBOX_WAKE not in heard.before(marker)
        await transaction.commit()
        await eventually(lambda: OUTBOX_WAKE in heard.wakes, "the outbox wake is heard")


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_rolled_back_stage_sends_no_wake(schema: str, kind: Kind) -> None:
    async with opened(schema) as relay_side, opened(schema) as staging:
        heard = await subscribed(relay_side)
        await stage_in_transaction(kind, outbox_of(staging), [new_job()], commit=False)
        marker = await mark(wake_channel(schema), heard)
    assert OUTBOX_WAKE not in heard.before(marker)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_committed_stage_wakes_on_every_connection_kind(schema: str, kind: Kind) -> None:
    async with opened(schema) as relay_side, opened(schema) as staging:
        heard = await subscribed(relay_side)
        await stage_in_transaction(kind, outbox_of(staging), [new_job()], commit=True)
        await eventually(lambda: OUTBOX_WAKE in heard.wakes, "the outbox wake is heard")


@pytest.mark.asyncio
async def test_a_stage_of_delayed_rows_only_sends_no_wake(schema: str) -> None:
    clock = ManualClock()
    async with opened(schema) as relay_side, opened(schema, clock) as staging:
        heard = await subscribed(relay_side)
        await outbox_of(staging).stage([new_job(run_at_ms=clock.now_ms() + HOUR_MS)])
        marker = await mark(wake_channel(schema), heard)
    assert OUTBOX_WAKE not in heard.before(marker)


class FrozenMonotonic:
    """A `time` stand-in for `wake_slots`: its monotonic clock moves only when told."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def monotonic_ns(self) -> int:
        return self.ms * 1_000_000


@pytest.mark.asyncio
async def test_the_wake_slot_keeps_a_burst_of_stages_to_one_notify(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = FrozenMonotonic()
    monkeypatch.setattr(wake_slots, "time", frozen)
    channel = wake_channel(schema)
    heard = Heard()
    async with opened(schema) as backend, session() as listener, session() as conn:
        await listener.add_listener(channel, heard.on_notify)
        for _ in range(20):
            async with conn.transaction():
                await answered(outbox_of(backend).stage_on(conn, [new_job()]))
        first = await mark(channel, heard)
        frozen.ms += WAKE_SLOT_MS
        await answered(outbox_of(backend).stage_on(conn, [new_job()]))
        second = await mark(channel, heard)
    assert heard.before(first).count(OUTBOX_WAKE) == 1
    assert heard.before(second).count(OUTBOX_WAKE) == 2  # the next slot may notify again


# -- (e) the schema ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_opening_a_version_3_schema_adds_the_outbox(schema: str, other_schema: str) -> None:
    quoted = quote_schema(schema)
    job = new_job()
    async with opened(schema) as backend:
        await backend.jobs.enqueue([job])
    async with opened(other_schema):
        pass
    async with session() as conn:
        # version 3 as it shipped: everything but the outbox, the slots under their old name
        await conn.execute(f"drop table {quoted}.outbox")
        await slots_named_leases(conn, schema)
        await conn.execute(f"update {quoted}.schema_version set version = 3")
    async with opened(schema) as backend:
        await outbox_of(backend).stage([new_job()])
        assert await outbox_of(backend).pending() == 1
        assert (await backend.jobs.get(job.id)) is not None
    async with session() as conn:
        assert await conn.fetchval(f"select version from {quoted}.schema_version") == SCHEMA_VERSION
        fresh = await schema_structure(conn, other_schema)
        assert await schema_structure(conn, schema) == fresh
