"""The claim is a partial-index scan at 1,000,000 rows: index regressions ship silently otherwise.

One bulk statement loads a realistic table (most rows finished, a large share delayed, a few
hundred due in one queue), the table is analyzed, and the driver's real claim statement is
explained with the parameters a worker sends. Nothing is timed.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from xjobs.contract.driver import LAPSED_ON_FINAL_ATTEMPT
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.sql import Statements

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROWS = 1_000_000
DUE = 300  # ready and due, all in the claimed queue
HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# Row i: i <= DUE is ready and due in `default`; every 50th (from 51) is running under a live
# lease; every 4th is ready an hour or more in the future (delayed); the rest completed a day ago.
# Ids are increasing, as a time-ordered id would be, which keeps the load to seconds.
LOAD = """
insert into {schema}.jobs (id, run_id, name, queue, tenant_id, idempotency_key, payload, state,
                           priority, run_at_ms, attempt, max_attempts, claims, claimed_by,
                           lease_until_ms, created_at_ms, updated_at_ms, finished_at_ms)
select ('00000000-0000-4000-8000-' || lpad(to_hex(g.i), 12, '0'))::uuid,
       ('00000000-0000-4000-9000-' || lpad(to_hex(g.i), 12, '0'))::uuid,
       'job_' || (g.i % 7),
       case when g.i <= {due} then 'default'
            else (array['default', 'emails', 'reports'])[1 + g.i % 3] end,
       null,
       'key-' || lpad(g.i::text, 7, '0'),
       '{{}}'::jsonb,
       k.state,
       0,
       case when g.i <= {due} then $1::bigint - 1000 - g.i
            when k.state = 'ready' then $1::bigint + {hour} + g.i
            else $1::bigint - {day} + g.i end,
       case when k.state in ('completed', 'running') then 1 else 0 end,
       3,
       case when k.state in ('completed', 'running') then 1 else 0 end,
       case when k.state = 'running' then 'worker-elsewhere' end,
       case when k.state = 'running' then $1::bigint + 60000 end,
       $1::bigint - {day} + g.i,
       $1::bigint - {day} + g.i,
       case when k.state = 'completed' then $1::bigint - {day} + g.i + 50 end
from generate_series(1, {rows}) as g(i)
cross join lateral (
    select case when g.i <= {due} then 'ready'
                when g.i % 50 = 1 then 'running'
                when g.i % 4 = 0 then 'ready'
                else 'completed' end as state
) k
"""

MIX = """
select count(*) as total,
       count(*) filter (where state = 'completed') as completed,
       count(*) filter (where state = 'ready' and run_at_ms > $1) as delayed,
       count(*) filter (where state = 'ready' and run_at_ms <= $1) as due,
       count(distinct queue) filter (where state = 'ready' and run_at_ms <= $1) as due_queues
from {schema}.jobs
"""


@dataclass(frozen=True, slots=True)
class ExplainedClaim:
    plan: dict[str, Any]
    text: str
    mix: dict[str, int]


def server_url() -> str:
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def explained() -> AsyncIterator[ExplainedClaim]:
    """The claim's plan over a loaded, analyzed table in a schema of its own (dropped after)."""
    url = server_url()
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    quoted = quote_schema(schema)
    backend = await open_backend(url, schema=schema, max_size=1)
    await backend.close()
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        now_ms = int(time.time() * 1000)
        load = LOAD.format(schema=quoted, due=DUE, hour=HOUR_MS, day=DAY_MS, rows=ROWS)
        await conn.execute(load, now_ms)
        await conn.execute(f"analyze {quoted}.jobs")
        mix = dict(await conn.fetchrow(MIX.format(schema=quoted), now_ms) or {})

        # What a worker polling two queues sends: the server clock ($1 null), ten a queue.
        claim = Statements(quoted)["claim"]
        args = (
            None,
            ["default", "emails"],
            [10, 10],
            str(uuid.uuid4()),
            20,
            30_000,
            60_000,
            LAPSED_ON_FINAL_ATTEMPT,
        )
        plan = json.loads(await conn.fetchval(f"explain (format json) {claim}", *args))[0]
        text = "\n".join(row[0] for row in await conn.fetch(f"explain {claim}", *args))
        print(f"\nthe claim at {ROWS:,} rows ({mix}):\n{text}")
        yield ExplainedClaim(plan=plan["Plan"], text=text, mix=mix)
    finally:
        try:
            await conn.execute(f"drop schema if exists {quoted} cascade")
        finally:
            await conn.close()


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from nodes(child)


def cte(plan: dict[str, Any], name: str) -> dict[str, Any]:
    found = [n for n in nodes(plan) if n.get("Subplan Name") == f"CTE {name}"]
    assert len(found) == 1, f"the plan has no single CTE {name}"
    return found[0]


async def test_the_table_holds_a_million_rows_mostly_finished_or_delayed_few_due(
    explained: ExplainedClaim,
) -> None:
    mix = explained.mix
    assert (mix["total"], mix["due"], mix["due_queues"]) == (ROWS, DUE, 1)
    assert mix["completed"] > ROWS // 2
    assert mix["delayed"] > ROWS // 5


async def test_the_claim_of_due_jobs_scans_the_partial_index_jobs_claimable(
    explained: ExplainedClaim,
) -> None:
    scans = [
        n
        for n in nodes(cte(explained.plan, "due"))
        if n.get("Index Name") == "jobs_claimable"
        and n["Node Type"] in ("Index Scan", "Index Only Scan")
    ]
    assert scans, explained.text


async def test_the_index_gives_claim_order_without_a_sort(explained: ExplainedClaim) -> None:
    sorts = [n for n in nodes(cte(explained.plan, "due")) if n["Node Type"] == "Sort"]
    assert sorts == [], explained.text


async def test_the_claim_never_seq_scans_the_jobs_table(explained: ExplainedClaim) -> None:
    seq_scans = [
        n
        for n in nodes(explained.plan)
        if n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "jobs"
    ]
    assert seq_scans == [], explained.text
