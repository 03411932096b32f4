"""The one install point: run the DDL of `sql/ddl.sql` in a schema, idempotently, in one transaction."""

from __future__ import annotations

import asyncpg

from xjobs_pg.errors import interpret_error
from xjobs_pg.sql import read_sql, split_statements

SCHEMA_VERSION = 15


def ddl_statements(quoted_schema: str) -> list[str]:
    """Every DDL statement, rendered for one schema."""
    return [s.replace("{schema}", quoted_schema) for s in split_statements(read_sql("ddl.sql"))]


# The version an installed schema records, read once the install lock is held (the table named
# by a validated, quoted schema: `quote_schema`).
HAS_VERSION = "select to_regclass($1) is not null"
INSTALLED_VERSION = "select version from {schema}.schema_version"


async def install(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, quoted_schema: str
) -> None:
    """Create (or grow) every durable table; safe to run again, and by many processes at once.

    The first statement takes the install lock. An installer that got it after another one
    finished finds the schema current and runs nothing more: its `alter table`s would otherwise
    wait on the locks of the processes already running on the tables, while they wait on it.
    """
    lock, *rest = ddl_statements(quoted_schema)
    try:
        async with conn.transaction():
            await conn.execute(lock)
            if await installed_version(conn, quoted_schema) >= SCHEMA_VERSION:
                return
            for statement in rest:
                await conn.execute(statement)
    except Exception as exc:
        raise interpret_error(exc) from exc


async def installed_version(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, quoted_schema: str
) -> int:
    """The schema version recorded in the schema (0 when none is)."""
    if not await conn.fetchval(HAS_VERSION, f"{quoted_schema}.schema_version"):
        return 0
    version = await conn.fetchval(INSTALLED_VERSION.replace("{schema}", quoted_schema))
    return 0 if version is None else int(version)
