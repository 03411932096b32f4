"""Postgres events scoped by tenant (schema version 14): a version 13 schema, whose events and waits
have no tenant, is upgraded by opening it, and its rows are of the untenanted scope."""

from __future__ import annotations

import pytest

from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.schema import quote_schema
from xjobs_pg.testing import opened, schema_structure, session

AS_VERSION_13 = """
drop index {schema}.events_by_tenant_name;
drop index {schema}.event_waits_by_tenant_event;
alter table {schema}.events drop column tenant;
alter table {schema}.event_waits drop column tenant;
create index events_by_name on {schema}.events (name, sent_at_ms, id);
create index event_waits_by_event on {schema}.event_waits (event);
update {schema}.schema_version set version = 13;
"""


@pytest.mark.asyncio
async def test_opening_a_version_13_schema_scopes_its_events_as_untenanted(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        assert old.events is not None
        kept = await old.events.send("order.paid", '{"n": 1}')
    async with session() as conn:
        await conn.execute(AS_VERSION_13.format(schema=quote_schema(schema)))
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            same = await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        assert upgraded.events is not None
        untenanted = await upgraded.events.find("order.paid", "{}", 0)
        tenanted = await upgraded.events.find("order.paid", "{}", 0, tenant="org-a")
    assert (version, same) == (SCHEMA_VERSION, True)
    assert untenanted is not None
    assert (untenanted.id, tenanted) == (kept.id, None)
