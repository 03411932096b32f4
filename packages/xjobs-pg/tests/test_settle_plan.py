"""The ack of many runs finds each job by its id, whatever the statistics saw when it was planned.

A plan made while no job ran (the table analyzed then, as a fresh deployment is) must not read
the partial index of running jobs whole: its entries grow with every claim until a vacuum.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest

from xjobs.contract.driver import Claim
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.params import AckManyParams
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.sql import Statements

pytestmark = pytest.mark.asyncio

ROWS = 3_000
ACKED = 10

# ROWS ready jobs in one queue, every one of them then claimed (running) after the analyze.
LOAD = """
insert into {schema}.jobs (id, run_id, name, queue, idempotency_key, payload, run_at_ms,
                           max_attempts, created_at_ms, updated_at_ms)
select gen_random_uuid(), gen_random_uuid(), 'job', 'default', 'key-' || g, '{{}}', 0, 3, 0, 0
from generate_series(1, {rows}) as g
"""
CLAIM_ALL = """
update {schema}.jobs
set state = 'running', claimed_by = 'worker-1', claims = 1, attempt = 1, lease_until_ms = 60000
"""


def server_url() -> str:
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += nodes(child)
    return found


class _RolledBack(Exception):
    """Raised inside the transaction of the explained ack, so the rows it settled stay running."""


async def test_an_ack_of_many_probes_each_id_where_the_statistics_saw_no_running_job(
    schema: str,
) -> None:
    url = server_url()
    backend = await open_backend(url, schema=schema, max_size=1)
    await backend.close()
    quoted = quote_schema(schema)
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await conn.execute(LOAD.format(schema=quoted, rows=ROWS))
        await conn.execute(f"analyze {quoted}.jobs")  # the statistics see ready jobs only
        await conn.execute(CLAIM_ALL.format(schema=quoted))
        ids = await conn.fetch(f"select id from {quoted}.jobs limit {ACKED}")
        claims = [Claim(str(row["id"]), "worker-1", 1) for row in ids]
        statement = Statements(quoted)["ack_many"]
        try:
            async with conn.transaction():
                found = await conn.fetchval(
                    f"explain (analyze, format json) {statement}",
                    *AckManyParams(None, claims).bind(),
                )
                raise _RolledBack
        except _RolledBack:
            pass
    finally:
        await conn.close()
    plan = json.loads(found)[0]["Plan"]
    scans = [
        n for n in nodes(plan) if n.get("Relation Name") == "jobs" and "Scan" in n["Node Type"]
    ]
    text = json.dumps(plan, indent=1)
    assert {n.get("Index Name") for n in scans} == {"jobs_pkey"}, text
    assert sum(n["Actual Rows"] * n["Actual Loops"] for n in scans) == ACKED, text
