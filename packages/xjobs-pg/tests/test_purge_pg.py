"""Retention on Postgres: the purge statements walk indexes, the install upgrades a version-7 schema's
table settings, and a purge of finished rows that spans many batches runs beside a worker draining W3.

The last test reports the claim's latency p50/p99 beside the purge and without it as figures (no
timed assertion: speed is the bench's); what it asserts is that every row went, in bounded
batches, while every job of the worker ran. The million-row figure is the bench's W9 (W3 while
purging 1,000,000 finished rows, against W3), where it is measured anyway.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from xjobs import App, JobContext, job
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.retention import Retention
from xjobs.testing.rows import new_job
from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.purge import PurgeParams
from xjobs_pg.schema import quote_schema
from xjobs_pg.sql import Statements
from xjobs_pg.testing import opened, server_url

pytestmark = pytest.mark.asyncio

DAY_MS = 86_400_000
ROWS = 20_000  # forty batches of BATCH: enough to cross many, the million is W9's
BATCH = 500
W3_JOBS = 2_000
POLICY = Retention()  # the defaults: a completed job is kept a day
# Finished rows, two days old: completed (most), dead and cancelled, over eight job names.
FILL = """
insert into {schema}.jobs (id, run_id, name, queue, idempotency_key, payload, state, run_at_ms,
                           attempt, max_attempts, claims, created_at_ms, updated_at_ms,
                           finished_at_ms)
select gen_random_uuid(), gen_random_uuid(), 'old_' || (g % 8), 'old', 'fill-' || g, '{{}}',
       case when g % 100 = 0 then 'dead' when g % 100 = 1 then 'cancelled' else 'completed' end,
       $1::bigint, 1, 3, 1, $1::bigint, $1::bigint, $1::bigint + (g % 1000)
from generate_series(1, $2::int) as g
"""


class Item(BaseModel):
    n: int


def _key(item: Item) -> str:
    return str(item.n)


@job(tenant="none", idempotency_key=_key, queue="w3")
async def w3_job(ctx: JobContext, item: Item) -> None:
    return None


async def _conn() -> asyncpg.Connection:
    return await asyncpg.connect(asyncpg_dsn(server_url())[0])


async def _fill(conn: asyncpg.Connection, quoted: str, rows: int, at_ms: int) -> None:
    await conn.execute(FILL.format(schema=quoted), at_ms, rows)
    await conn.execute(f"vacuum analyze {quoted}.jobs")


async def test_the_purge_of_jobs_reads_jobs_by_index_only(schema: str) -> None:
    """The loose scan and each group's oldest-first read use jobs_purgeable: no scan of jobs."""
    quoted = quote_schema(schema)
    async with opened(schema):
        pass
    conn = await _conn()
    try:
        now = int(time.time() * 1000)
        await _fill(conn, quoted, 200_000, now - 2 * DAY_MS)
        cut = POLICY.cut(now, {"old_3": 3 * DAY_MS})
        statement = Statements(quoted)["purge_jobs"]
        transaction = conn.transaction()
        await transaction.start()
        try:
            rows = await conn.fetch(
                "explain (analyze, costs off, timing off) " + statement,
                *PurgeParams.of("jobs", cut, 1_000).bind(),
            )
        finally:
            await transaction.rollback()
        plan = "\n".join(r[0] for r in rows)
        assert "jobs_purgeable" in plan, plan
        assert "Seq Scan on jobs" not in plan, plan
    finally:
        await conn.close()


async def test_installing_again_upgrades_a_version_7_schema(schema: str) -> None:
    """A schema installed before retention gets the index, the table settings and version 8."""
    quoted = quote_schema(schema)
    async with opened(schema):
        pass
    conn = await _conn()
    try:
        await conn.execute(f"drop index {quoted}.jobs_purgeable")
        await conn.execute(f"alter table {quoted}.jobs reset (fillfactor)")
        await conn.execute(f"update {quoted}.schema_version set version = 7")
        async with opened(schema) as backend:
            await backend.install()
            await backend.install()  # idempotent
        version = await conn.fetchval(f"select version from {quoted}.schema_version")
        options = await conn.fetchval(
            "select reloptions from pg_class where oid = to_regclass($1)", f"{quoted}.jobs"
        )
        index = await conn.fetchval("select to_regclass($1)", f"{quoted}.jobs_purgeable")
    finally:
        await conn.close()
    assert version == SCHEMA_VERSION >= 8
    assert "fillfactor=80" in options
    assert "autovacuum_vacuum_scale_factor=0.01" in options
    assert index is not None


async def _claims(backend: Any, stop: asyncio.Event, samples: list[float]) -> None:
    """A probe beside the worker: one claim of the probe queue at a time, timed, then acked."""
    n = 0
    while not stop.is_set():
        row = new_job(name="probe", queue="probe", idempotency_key=f"probe-{n}")
        n += 1
        await backend.jobs.enqueue([row])
        started = time.perf_counter()
        taken = await backend.jobs.claim(ClaimOptions("probe-worker", {"probe": 1}, 30_000))
        samples.append((time.perf_counter() - started) * 1000.0)
        for claimed in taken.jobs:
            await backend.jobs.ack(claimed.claim)
        await asyncio.sleep(0.005)


async def _w3(app: App, start: int, samples: list[float]) -> float:
    """Enqueue W3_JOBS and drain them with a worker (c=10) while the probe times claims."""
    await app.enqueue_many(w3_job, [Item(n=start + i) for i in range(W3_JOBS)])
    stop = asyncio.Event()
    probe = asyncio.create_task(_claims(app.backend, stop, samples))
    started = time.perf_counter()
    stats = await app.run_worker(
        queues=["w3"], until_idle=True, concurrency=10, handle_signals=False
    )
    elapsed = time.perf_counter() - started
    stop.set()
    await probe
    assert stats.as_dict()["completed"] >= W3_JOBS
    return W3_JOBS / elapsed


def _p(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(sorted(samples), n=100, method="inclusive")
    return {"p50_ms": round(statistics.median(samples), 2), "p99_ms": round(cuts[98], 2)}


async def test_a_purge_of_many_batches_of_finished_rows_beside_a_running_worker(
    schema: str,
) -> None:
    """ROWS finished rows go in batches of BATCH, paced, while a worker drains W3 jobs; the claim's
    latency during the purge and without it are reported (stdout and XJOBS_PURGE_FIGURES)."""
    quoted = quote_schema(schema)
    policy = Retention(batch=BATCH)
    app = App(server_url(), jobs=[w3_job], retention=policy, backend_options={"schema": schema})
    conn = await _conn()
    try:
        async with app:
            await _fill(conn, quoted, ROWS, int(time.time() * 1000) - 15 * DAY_MS)
            quiet: list[float] = []
            quiet_rate = await _w3(app, 0, quiet)
            busy: list[float] = []
            rates: list[float] = []
            started = time.perf_counter()
            purge = asyncio.create_task(app.purge())
            while not purge.done():
                rates.append(await _w3(app, (len(rates) + 1) * W3_JOBS, busy))
            report = await purge
            purge_s = time.perf_counter() - started
            left = await conn.fetchval(f"select count(*) from {quoted}.jobs where queue = 'old'")
    finally:
        await conn.close()
    figures: dict[str, Any] = {
        "rows": ROWS,
        "purged": report["jobs"],
        "purge_s": round(purge_s, 1),
        "claim_without_purge": _p(quiet),
        "claim_during_purge": _p(busy),
        "w3_jobs_per_s_without": round(quiet_rate, 1),
        "w3_jobs_per_s_during": round(statistics.fmean(rates), 1),
        "w3_rounds_during": len(rates),
    }
    figures["p99_ratio"] = round(
        figures["claim_during_purge"]["p99_ms"] / figures["claim_without_purge"]["p99_ms"], 2
    )
    print(json.dumps(figures))
    out = os.environ.get("XJOBS_PURGE_FIGURES")
    if out:
        Path(out).write_text(json.dumps(figures, indent=2))  # noqa: ASYNC240 - once, after the timing
    assert report["jobs"] == ROWS
    assert left == 0
    assert rates
    assert busy
