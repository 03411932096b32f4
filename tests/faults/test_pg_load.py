"""Faults under load on Postgres: a pool no bigger than the concurrency, a snapshot held open, depth.

Promised:

- pool max = concurrency and every body hammering the store (step writes, reads, enqueues) for
  three leases: the heartbeats still land (they queue for a connection like every statement and
  the pool hands connections out in turn), no lease is lost, every job completes once;
- a REPEATABLE READ transaction held open (its snapshot pins the xmin horizon, so no dead row can
  be vacuumed) may slow the claim but never stops it, and throughput recovers once it ends (the
  throughput before, during and after is a reported figure);
- depth: with ready, scheduled and completed rows in the table (1,000,000 each in the report run,
  20,000 each in CI) the claim statement's plan reads `jobs` through an index, never a sequential
  scan, and the claim's p50/p99 are reported (a figure, never an assertion).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import xjobs
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.schema import quote_schema
from xjobs_pg.sql import Statements

from .fault_app import JOBS, Work, record, work
from .harness import FIGURES, Producer, Scene, pg_session, until

POOL = 4  # = the worker's concurrency
HELD_S = 6.0  # how long the snapshot is held open
CI_DEPTH = 20_000
REPORT_DEPTH = 1_000_000
DEEP_QUEUE = "deep"


# -- pool max = concurrency ----------------------------------------------------------------------

STORE: dict[str, xjobs.App] = {}


@xjobs.job(tenant="none", idempotency_key=lambda w: w.key, queue="busy")
async def busy(ctx: xjobs.JobContext, w: Work) -> None:
    """For `hold_s`, every statement it can: a step write, a read of its own job, a child job."""
    record("start", ctx.job_id, w.key, ctx.attempt)
    app = STORE["app"]
    ends = time.monotonic() + w.hold_s
    n = 0
    while time.monotonic() < ends:
        n += 1
        await ctx.step.run(f"s{n}", lambda n=n: n)
        await app.get_job(ctx.job_id)
        await child.enqueue(Work(key=f"{w.key}-child-{n}"))
    record("effect", ctx.job_id, w.key, ctx.attempt, statements=3 * n)


@xjobs.job(tenant="none", idempotency_key=lambda w: w.key, queue="children")
async def child(ctx: xjobs.JobContext, w: Work) -> None:
    """Enqueued by `busy`, never run here (its queue has no worker)."""


@pytest.mark.scenario("pool max = concurrency, every body on the store for 3 leases")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_a_pool_no_bigger_than_the_concurrency_keeps_every_lease(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XJOBS_FAULT_EFFECTS", str(scene.effects.path))
    backend = await open_backend(scene.url, max_size=POOL)
    try:
        async with xjobs.App(backend, jobs=[busy, child]) as app:
            STORE["app"] = app
            keys = [f"busy-{n}" for n in range(2 * POOL)]
            results = await busy.enqueue_many([Work(key=k, hold_s=6.0) for k in keys])
            scene.ledger.acknowledge_all(keys, results)
            worker = app.worker(queues=["busy"], concurrency=POOL, lease=timedelta(seconds=2))
            await worker.start()
            try:
                ledger = await scene.settle(app)
            finally:
                await worker.stop()
            rows = [await app.get_job(r.job_id) for r in results]
    finally:
        await backend.close()
    statements = sum(r.get("statements", 0) for r in scene.effects.rows("effect"))
    print(f"\nbodies ran {statements} store statements on a pool of {POOL}")
    ledger.check(duplicated=0)
    assert worker.stats.lease_lost == 0, worker.stats
    assert {(row.state, row.attempt) for row in rows} == {("completed", 1)}


# -- a snapshot held open ------------------------------------------------------------------------


def per_second(times: list[float], start: float, end: float) -> float:
    return sum(1 for at in times if start <= at < end) / max(end - start, 1e-9)


@pytest.mark.scenario("REPEATABLE READ transaction held open under load")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_a_snapshot_held_open_slows_the_claim_but_never_stops_it(scene: Scene) -> None:
    schema = quote_schema(asyncpg_dsn(scene.url)[1]["schema"])
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        workers = [scene.worker(concurrency=5), scene.worker(concurrency=5)]
        await scene.started(*workers)
        feed = Producer(work, scene.ledger, lambda key: Work(key=key), count=400, every_s=0.025)
        producing = asyncio.ensure_future(feed.run())
        await asyncio.sleep(2.0)
        async with pg_session(scene.url) as holder, scene.window("REPEATABLE READ held open"):
            held_from = time.time()
            async with holder.transaction(isolation="repeatable_read"):
                await holder.fetchval(f"select count(*) from {schema}.jobs")
                await asyncio.sleep(HELD_S)
            held_to = time.time()
        await producing
        ledger = await scene.settle(app)
    done = [row["at"] for row in scene.effects.rows("effect")]
    before = per_second(done, held_from - 2.0, held_from)
    during = per_second(done, held_from, held_to)
    after = per_second(done, held_to, held_to + 2.0)
    figure = f"{before:.0f} jobs/s before, {during:.0f} while held, {after:.0f} after"
    FIGURES["REPEATABLE READ held open 6 s (postgres)"] = figure
    print(f"\n{figure}")
    ledger.check(duplicated=0)
    assert during > 0, "the claim stopped while the snapshot was held"


# -- depth ---------------------------------------------------------------------------------------

LOAD = """
insert into {schema}.jobs (id, run_id, name, queue, idempotency_key, payload, state, run_at_ms,
                           attempt, max_attempts, claims, created_at_ms, updated_at_ms,
                           finished_at_ms)
select gen_random_uuid(), gen_random_uuid(), $1::text, $2::text, 'deep-' || g,
       '{{"key": "deep-' || g || '"}}',
       case when g > 2 * n then 'completed' else 'ready' end,
       case when g <= n then now_ms - 1000 when g <= 2 * n then now_ms + 86400000
            else now_ms - 86400000 end,
       case when g > 2 * n then 1 else 0 end, 5,
       case when g > 2 * n then 1 else 0 end, now_ms - 86400000, now_ms - 86400000,
       case when g > 2 * n then now_ms - 86400000 end
from (select $3::bigint as n, $4::bigint as now_ms) p, generate_series(1, 3 * p.n) as g
"""


@xjobs.job(tenant="none", idempotency_key=lambda w: w.key, queue=DEEP_QUEUE)
async def deep(ctx: xjobs.JobContext, w: Work) -> None:
    """A row of the deep table: nothing to do."""


class ClaimTimes:
    """An asyncpg query logger keeping each claim statement's duration and its last arguments."""

    def __init__(self, claim_sql: str) -> None:
        self.sql = claim_sql
        self.elapsed: list[float] = []
        self.args: tuple[Any, ...] = ()

    def __call__(self, logged: Any) -> None:
        if logged.query == self.sql and logged.exception is None:
            self.elapsed.append(logged.elapsed)
            self.args = tuple(logged.args)


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child_plan in plan.get("Plans", []):
        yield from plan_nodes(child_plan)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.scenario("depth: ready + scheduled + completed rows, the claim")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_the_claim_reads_an_index_at_depth(
    scene: Scene, request: pytest.FixtureRequest
) -> None:
    report = bool(request.config.getoption("--report", default=False)) or (
        os.environ.get("XJOBS_FAULTS_REPORT") == "1"
    )
    depth = REPORT_DEPTH if report else CI_DEPTH
    name = asyncpg_dsn(scene.url)[1]["schema"]
    schema = quote_schema(name)
    times = ClaimTimes(Statements(schema)["claim"])
    backend = await open_backend(scene.url, on_query=times)
    try:
        async with xjobs.App(backend, jobs=[deep]) as app:
            async with pg_session(scene.url) as conn:
                now_ms = int(time.time() * 1000)
                loading = time.monotonic()
                await conn.execute(LOAD.format(schema=schema), deep.name, DEEP_QUEUE, depth, now_ms)
                await conn.execute(f"vacuum (analyze) {schema}.jobs")  # as autovacuum would
                loaded_s = time.monotonic() - loading
            worker = app.worker(queues=[DEEP_QUEUE], concurrency=10)
            await worker.start()
            try:
                await until(lambda: len(times.elapsed) >= 200, what="200 claims", timeout_s=60)
            finally:
                await worker.stop()
            async with pg_session(scene.url) as conn:
                # the plan a worker runs: its session keeps the generic plan after five claims
                await conn.execute("set plan_cache_mode = force_generic_plan")
                explained = await conn.fetchval(f"explain (format json) {times.sql}", *times.args)
            await scene.settle(app)  # no job acknowledged: the ledger only closes
    finally:
        await backend.close()
    plan = json.loads(explained)[0]["Plan"]
    scans = [
        (node["Node Type"], node.get("Index Name"))
        for node in plan_nodes(plan)
        if node.get("Relation Name") == "jobs"
    ]
    p50, p99 = (percentile(times.elapsed, q) * 1000 for q in (0.5, 0.99))
    figure = (
        f"{depth:,} ready + {depth:,} scheduled + {depth:,} completed (loaded in {loaded_s:.0f} s): "
        f"claim p50 {p50:.1f} ms, p99 {p99:.1f} ms over {len(times.elapsed)} claims; "
        f"jobs read by {sorted(set(scans))}"
    )
    FIGURES[f"depth {depth:,} per state (postgres)"] = figure
    print(f"\n{figure}")
    assert scans, f"the claim plan does not read jobs: {explained}"
    assert all(kind != "Seq Scan" for kind, _ in scans), f"a sequential scan of jobs: {scans}"
