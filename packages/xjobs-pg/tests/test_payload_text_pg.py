"""Postgres payloads as text (schema version 8): stored byte for byte as the codec wrote them, and
a version 7 schema, whose payload columns are jsonb, moved to text by opening it."""

from __future__ import annotations

import pytest

from xjobs.testing.rows import new_job
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.schema import quote_schema
from xjobs_pg.testing import opened, schema_structure, session

# what jsonb would change: -0.0 (numeric has no negative zero), exponents (1e300 comes back as a
# 301-digit integer), key order and spacing
EXACT = '{"z": [1e+300, -0.0, 1e+16, 5e-324], "a": {"b": 1.0}}'

AS_VERSION_7 = """
alter table {schema}.jobs alter column payload type jsonb using payload::jsonb;
alter table {schema}.outbox alter column payload type jsonb using payload::jsonb;
update {schema}.schema_version set version = 7;
"""


async def payload_types(schema: str) -> list[str]:
    async with session() as conn:
        rows = await conn.fetch(
            "select table_name, data_type from information_schema.columns"
            " where table_schema = $1 and column_name = 'payload' order by table_name",
            schema,
        )
    return [f"{row['table_name']}:{row['data_type']}" for row in rows]


@pytest.mark.asyncio
async def test_a_payload_is_stored_and_claimed_byte_for_byte(schema: str) -> None:
    async with opened(schema) as backend:
        row = new_job(payload=EXACT)
        await backend.jobs.enqueue([row])
        async with session() as conn:
            stored = await conn.fetchval(
                f"select payload from {quote_schema(schema)}.jobs where id = $1::uuid", row.id
            )
        record = await backend.jobs.get(row.id)
    assert stored == EXACT
    assert record is not None
    assert record.payload == EXACT


@pytest.mark.asyncio
async def test_opening_a_version_7_schema_moves_the_payloads_to_text(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        kept = new_job(payload='{"n": 1, "s": "x"}')
        await old.jobs.enqueue([kept])
    async with session() as conn:
        await conn.execute(AS_VERSION_7.format(schema=quote_schema(schema)))
    before = await payload_types(schema)
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            assert await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        record = await upgraded.jobs.get(kept.id)
        fresh = new_job(payload=EXACT)
        await upgraded.jobs.enqueue([fresh])
        again = await upgraded.jobs.get(fresh.id)
    async with opened(schema):  # installing again changes nothing
        pass
    assert before == ["events:jsonb", "jobs:jsonb", "outbox:jsonb"]
    assert await payload_types(schema) == ["events:jsonb", "jobs:text", "outbox:text"]
    assert version == SCHEMA_VERSION >= 8
    assert record is not None
    assert record.payload == '{"n": 1, "s": "x"}'  # jsonb's own text of what it held
    assert again is not None
    assert again.payload == EXACT
