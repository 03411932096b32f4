"""The one install point: run the DDL of `sql/ddl.sql` in a schema, idempotently, in one transaction."""

from __future__ import annotations

import asyncpg

from xjobs_pg.errors import interpret_error
from xjobs_pg.sql import read_sql, split_statements

SCHEMA_VERSION = 7


def ddl_statements(quoted_schema: str) -> list[str]:
    """Every DDL statement, rendered for one schema."""
    return [s.replace("{schema}", quoted_schema) for s in split_statements(read_sql("ddl.sql"))]


async def install(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, quoted_schema: str
) -> None:
    """Create (or grow) every durable table; safe to run again, and by two processes at once."""
    try:
        async with conn.transaction():
            for statement in ddl_statements(quoted_schema):
                await conn.execute(statement)
    except Exception as exc:
        raise interpret_error(exc) from exc
