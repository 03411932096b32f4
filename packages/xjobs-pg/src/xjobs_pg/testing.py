"""Fresh, isolated Postgres backends for the parity suite: one schema per test on a shared server."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable


def server_url() -> str:
    """The test server's URL, or a skip (a failure under `XJOBS_REQUIRE_SERVERS=1`)."""
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the parity suite: {exc}")


def server_dsn() -> str:
    """The test server as asyncpg takes it."""
    return asyncpg_dsn(server_url())[0]


class QueryLog:
    """An asyncpg query logger (`opened(on_query=...)`) keeping each statement's text."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, record: Any) -> None:
        self.queries.append(str(record.query))

    async def taken(self) -> list[str]:
        """The statements so far: asyncpg calls a logger on the loop turn after its statement."""
        await asyncio.sleep(0)
        return self.queries

    async def clear(self) -> None:
        """Forget the statements so far, the last one's logger call included."""
        await asyncio.sleep(0)
        self.queries.clear()


@asynccontextmanager
async def scratch_schema() -> AsyncIterator[str]:
    """A fresh `xjobs_t_*` schema name for one test, dropped (with all it holds) afterwards."""
    name = f"xjobs_t_{secrets.token_hex(6)}"
    try:
        yield name
    finally:
        conn = await asyncpg.connect(server_dsn())
        try:
            await conn.execute(DROP_SCHEMA.format(schema=quote_schema(name)))
        finally:
            await conn.close()


@asynccontextmanager
async def session() -> AsyncIterator[asyncpg.Connection]:
    """One plain connection to the test server, closed afterwards."""
    conn = await asyncpg.connect(server_dsn())
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def opened(
    schema: str, clock: Clock | None = None, on_query: Callable[[Any], None] | None = None
) -> AsyncIterator[Backend]:
    """A small-pool backend on `schema` of the test server, closed afterwards."""
    backend = await open_backend(
        server_url(), schema=schema, clock=clock, max_size=4, on_query=on_query
    )
    try:
        yield backend
    finally:
        await backend.close()


SCHEMA_STRUCTURE = """
select c.relname, c.relkind::text as relkind,
       replace(coalesce(pg_get_indexdef(c.oid), ''), n.nspname || '.', '') as indexdef,
       coalesce((select string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                   || case when a.attnotnull then ' not null' else '' end, ', '
                                   order by a.attnum)
                 from pg_attribute a
                 where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped), '') as columns
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = $1
order by c.relname
"""


async def schema_structure(conn: asyncpg.Connection, schema: str) -> list[tuple[Any, ...]]:
    """Every relation of `schema` with its kind, index definition and columns (an upgrade compares them)."""
    return [tuple(row) for row in await conn.fetch(SCHEMA_STRUCTURE, schema)]


WITHOUT_CHILDREN = """
drop table {schema}.child_shards;
drop table {schema}.child_groups;
drop index {schema}.jobs_children;
alter table {schema}.jobs drop column parent_id, drop column parent_run_id,
    drop column child_step, drop column child_index, drop column detached,
    drop column child_endings;
"""
"""What version 15 added (child jobs): a script taking it away makes a schema as an older release
installed it (a test of an older version's upgrade runs it first, so the columns come back in
the order a fresh install gives them)."""


async def slots_named_leases(conn: asyncpg.Connection, schema: str) -> None:
    """Give `schema` the fleet slot table under its name before version 5 (`leases`), as older installs have it."""
    quoted = quote_schema(schema)
    await conn.execute(f"alter table {quoted}.slots rename to leases")
    await conn.execute(f"alter table {quoted}.leases rename constraint slots_pkey to leases_pkey")


LEAKED_TABLES = """
select schemaname || '.' || tablename as name
from pg_tables
where schemaname not in ('pg_catalog', 'information_schema')
  and schemaname not like 'xjobs_t_%' and schemaname <> 'xjobs'
"""
DROP_SCHEMA = "drop schema if exists {schema} cascade"


async def leaked_tables(url: str) -> list[str]:
    """Tables outside any xjobs test schema: a test must leave nothing there."""
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        rows = await conn.fetch(LEAKED_TABLES)
    finally:
        await conn.close()
    return [row["name"] for row in rows]


@asynccontextmanager
async def test_backend(clock: Clock) -> AsyncIterator[Backend]:
    """A backend in a schema of its own, dropped afterwards, with a check that nothing leaked."""
    url = server_url()
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    backend = await open_backend(url, clock=clock, schema=schema, max_size=30)
    try:
        yield backend
    finally:
        await backend.close()
        conn = await asyncpg.connect(asyncpg_dsn(url)[0])
        try:
            await conn.execute(DROP_SCHEMA.replace("{schema}", quote_schema(schema)))
        finally:
            await conn.close()
    leaks = await leaked_tables(url)
    assert not leaks, f"a test left tables outside its schema: {leaks}"
