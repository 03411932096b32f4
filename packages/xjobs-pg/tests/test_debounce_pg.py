"""Postgres debounce and throttle (schema version 10): a version 9 schema grows the throttle column
and index by opening it, and a plain enqueue writes nothing the flow statement reads."""

from __future__ import annotations

import pytest

from xjobs.testing.rows import new_job
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.schema import quote_schema
from xjobs_pg.testing import WITHOUT_CHILDREN, opened, schema_structure, session

AS_VERSION_9 = (
    WITHOUT_CHILDREN
    + """
drop index {schema}.jobs_throttled;
alter table {schema}.jobs drop column throttle_until_ms;
update {schema}.schema_version set version = 9;
"""
)


async def throttle_windows(schema: str) -> list[int | None]:
    async with session() as conn:
        rows = await conn.fetch(
            f"select throttle_until_ms from {quote_schema(schema)}.jobs order by created_at_ms, id"
        )
    return [row["throttle_until_ms"] for row in rows]


@pytest.mark.asyncio
async def test_opening_a_version_9_schema_adds_the_throttle_window(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        kept = new_job(idempotency_key="k1")
        await old.jobs.enqueue([kept])
    async with session() as conn:
        await conn.execute(AS_VERSION_9.format(schema=quote_schema(schema)))
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            assert await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        (throttled,) = await upgraded.jobs.enqueue(
            [new_job(idempotency_key="k2", throttle_ms=60_000)]
        )
    assert version == SCHEMA_VERSION >= 10
    assert throttled.deduped is False
    windows = await throttle_windows(schema)
    assert windows[0] is None
    assert windows[1] is not None


@pytest.mark.asyncio
async def test_a_plain_enqueue_leaves_the_throttle_window_unset(schema: str) -> None:
    async with opened(schema) as backend:
        await backend.jobs.enqueue([new_job(), new_job(debounce_ms=1_000)])
    assert await throttle_windows(schema) == [None, None]
