"""Faults: `kill -9` of workers while a parent maps 1,000 children, on Postgres, Redis and a
SQLite file (issue 44).

Promised: every child runs and is counted into its group once (a child whose worker died is
claimable again when its lease lapses and is settled by another worker; its ack lands once), and
the parent continues exactly once: the wake is written by the last child's own ending, never by
a poll, so a worker dying before, during or after the fan-in neither loses the wake nor repeats it.

On Redis a child's ending crosses three slots: an ending a kill cut between its steps stays in its
queue's `child_endings` HASH until the next delivery on that queue (any later child's settle) or
the retention purge's sweep. Here the kills land at 300 and 700 child runs, so later children's
settles deliver what they cut: the scenario needs no purge (the apps run with `retention=None`, no
scheduler runs one), and it checks that no ending is left undelivered at the end.

The worker processes run `xjobs worker test_children_kill:app` (this module, imported on its own
in the fault suite's folder: the harness is imported only under pytest).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg
import pytest
import pytest_asyncio
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_redis.keys import Keys

if __package__:  # under pytest; a worker process imports this module alone
    from .harness import LEASE_S, Proc, Scene, Target, until

URL = os.environ.get("XJOBS_FAULT_URL", "memory://")
PARENTS = "fan-parents"
KIDS = "fan-kids"
FAN = 1_000
HOLD_S = 0.2
START_S = 120.0
RETRY = xjobs.Retry(attempts=5, base=timedelta(milliseconds=200), cap=timedelta(milliseconds=500))


class Kid(BaseModel):
    n: int


class Fan(BaseModel):
    key: str
    count: int


def record(event: str, job_id: str, **extra: Any) -> None:
    """Append one event line to the effects file (one write on an O_APPEND descriptor)."""
    path = os.environ.get("XJOBS_FAULT_EFFECTS")
    if not path:
        return
    row = {"ev": event, "job": job_id, "key": "", "attempt": 0, "pid": os.getpid(), **extra}
    row["at"] = time.time()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(row, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def kid_key(value: Kid) -> str:
    return f"kid-{value.n}"


def fan_key(value: Fan) -> str:
    return value.key


@xjobs.job(tenant="none", idempotency_key=kid_key, queue=KIDS, retry=RETRY)
async def kid(ctx: xjobs.JobContext, input: Kid) -> int:
    """A child: held a moment (so a kill lands mid-run), then its number."""
    record("kid", ctx.job_id, n=input.n)
    await asyncio.sleep(HOLD_S)
    return input.n


@xjobs.job(tenant="none", idempotency_key=fan_key, queue=PARENTS, retry=RETRY)
async def fan(ctx: xjobs.JobContext, input: Fan) -> int:
    """The parent: maps its children, then records its one continuation."""
    record("fan-start", ctx.job_id)
    results = await ctx.step.map("kids", kid, [Kid(n=n) for n in range(input.count)])
    record("continued", ctx.job_id, results=len(results))
    return sum(results)


app = xjobs.App(URL, jobs=[fan, kid], retention=None)


TARGETS = {"postgres": "pg_target", "redis": "redis_target", "sqlite": "sqlite_target"}


@pytest.fixture(params=list(TARGETS))
def fan_scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    """A scene of this file's own app on each backend; its processes stopped by pid afterwards.
    (Its own parameter, not the suite's `target`: conftest's `ON_A_FILE` would deselect SQLite.)"""
    target: Target = request.getfixturevalue(TARGETS[request.param])
    scene = Scene("kill -9 workers mid-fan-in", target.engine, target.url, tmp_path)
    try:
        yield scene
    finally:
        unclean = scene.close()
    assert not unclean, f"processes that did not exit 0 on SIGTERM: {unclean}"


def fan_worker(scene: Scene) -> Proc:
    flags = ["--lease", str(LEASE_S), "--concurrency", "20", "--drain-timeout", "2"]
    return scene.start("worker", "test_children_kill:app", *flags, "--log-level", "INFO")


async def started(*procs: Proc) -> None:
    """Wait until each worker logged that it started (a bound against hangs: a loaded two-core
    machine has taken over 30 s to import and open one)."""
    for proc in procs:

        def up(p: Proc = proc) -> bool:
            return bool(p.lines("jobs.worker.started")) or not p.alive

        await until(up, what=f"{proc.name} to start", timeout_s=START_S)
        assert proc.alive, f"{proc.name} exited before it started:\n{proc.text()[-3000:]}"


@pytest_asyncio.fixture
async def opened_app(fan_scene: Scene) -> Any:
    async with xjobs.App(fan_scene.url, jobs=[fan, kid], retention=None) as opened:
        yield opened


@pytest.mark.asyncio
async def test_kill_9_of_workers_mid_fan_in_continues_the_parent_once(
    fan_scene: Scene, opened_app: xjobs.App
) -> None:
    scene = fan_scene
    enqueued = await fan.enqueue(Fan(key="fan-1", count=FAN))
    workers = [fan_worker(scene) for _ in range(3)]
    await started(*workers)
    # The worker that runs the parent dies as soon as its body starts: the parent's spawn (two
    # pages) is cut, its lease lapses, another worker replays it and spawns nothing twice.
    await until(lambda: scene.effects.rows("fan-start"), what="the parent's first run")
    (first_run,) = scene.effects.rows("fan-start")
    parent_host = next(p for p in workers if p.pid == first_run["pid"])
    scene.kill(parent_host)
    replacements = [fan_worker(scene)]  # a supervisor brings one back (not waited for here)
    killed = [parent_host]
    # Then two more workers die while the children run, each the one that started a child last.
    for done in (300, 700):

        def reached(d: int = done) -> bool:
            return len(scene.effects.rows("kid")) >= d

        await until(reached, what=f"{done} child runs")
        alive = {p.pid: p for p in scene.procs if p.alive}
        busy = [row["pid"] for row in scene.effects.rows("kid") if row["pid"] in alive]
        killed.append(alive[busy[-1]])  # maybe a replacement: it may run children already
        scene.kill(killed[-1])
        replacements.append(fan_worker(scene))
    total = await enqueued.result(timeout=timedelta(seconds=120))
    record_ = await opened_app.get_job(enqueued.job_id)
    children = opened_app.backend.children
    assert children is not None
    state = await children.group(enqueued.run_id, "kids")
    await asyncio.sleep(LEASE_S)  # a late duplicate ending would show in the counts by now
    family = await children.family(enqueued.job_id)
    completed = await completions(opened_app)
    if scene.engine == "postgres":
        rows = await children_rows(scene.url, enqueued.run_id)
        assert rows == {("completed", 1): FAN}  # each completed, counted into its group once
    if scene.engine == "redis":
        assert await undelivered(scene.url) == 0  # no cut ending left for a purge to deliver
    runs = scene.effects.rows("kid")
    ran = {row["n"] for row in runs}
    print(f"\n{len(runs)} child runs for {FAN} children (a rerun: a child cut by a kill)")
    continued = scene.effects.rows("continued")
    assert ran == set(range(FAN))  # every child ran
    assert family is not None
    assert dict(family.children) == {"completed": FAN}
    assert completed == FAN  # and its ack landed once
    assert state is not None
    assert (state.ended, state.failed, state.resolved) == (FAN, 0, True)
    assert len(continued) == 1  # the parent continued exactly once
    assert (record_.state, total) == ("completed", sum(range(FAN)))
    assert len(scene.faults) == 3
    # each replacement not killed since drains on SIGTERM at teardown
    await started(*(p for p in replacements if p not in killed))


COUNTS = """
select c.state, c.child_endings, count(*) as n
from {schema}.jobs c
where c.parent_run_id = $1 and c.child_step = 'kids'
group by c.state, c.child_endings
"""


async def children_rows(url: str, run_id: str) -> dict[tuple[str, int], int]:
    """The run's children by (state, endings), a child counted twice showing endings 2."""
    dsn, options = asyncpg_dsn(url)
    schema = quote_schema(options["schema"])
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(COUNTS.format(schema=schema), run_id)
    finally:
        await conn.close()
    return {(r["state"], r["child_endings"]): r["n"] for r in rows}


async def completions(app: xjobs.App) -> int:
    """How many completions of a child the settles counted (minute counters)."""
    introspection = app.backend.introspection
    assert introspection is not None
    buckets = await introspection.counters("minute", 0)
    return sum(b.count for b in buckets if (b.name, b.outcome) == ("kid", "completed"))


async def undelivered(url: str) -> int:
    """Endings recorded in the children's queue and not yet applied to their group (Redis)."""
    parts = urlsplit(url)
    (prefix,) = parse_qs(parts.query)["xjobs_prefix"]
    client = Redis.from_url(parts._replace(query="").geturl())
    try:
        return int(await client.hlen(Keys(prefix).child_endings(KIDS)))
    finally:
        await client.aclose()
