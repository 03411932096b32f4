"""Child jobs on Postgres (schema version 15, issue 44): what only Postgres has. A version 14 schema
is upgraded in place; a fan-in of 1,000 children settled by several workers at once (each its own
pool, so the endings race on the group's shard rows and row locks) counts every child once and
continues the parent once; a group whose children all ended before the parent parked parks it
due now."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job
from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import WAIT_FOREVER_MS, ClaimOptions, Nack, NewJob
from xjobs.contract.introspection import JobFilter
from xjobs.contract.retention import Retention
from xjobs.ids import new_id_pair
from xjobs_pg.install import SCHEMA_VERSION
from xjobs_pg.schema import quote_schema
from xjobs_pg.testing import WITHOUT_CHILDREN, opened, schema_structure, server_url, session

pytestmark = pytest.mark.asyncio

PARENTS = "wf-parents"
KIDS = "wf-kids"
FAN = 1_000
WORKERS = 4
SLOTS = {KIDS: 25, PARENTS: 1}

AS_VERSION_14 = WITHOUT_CHILDREN + "update {schema}.schema_version set version = 14;"


class Kid(BaseModel):
    n: int


class Fan(BaseModel):
    key: str
    count: int


def kid_key(value: Kid) -> str:
    return f"kid-{value.n}"


def fan_key(value: Fan) -> str:
    return value.key


def url_of(schema: str) -> str:
    url = server_url()
    return f"{url}{'&' if '?' in url else '?'}xjobs_schema={schema}"


async def test_opening_a_version_14_schema_adds_child_jobs_in_place(
    schema: str, other_schema: str
) -> None:
    async with opened(schema) as old:
        kept = await old.jobs.enqueue([new_job("kept")])
    async with session() as conn:
        await conn.execute(AS_VERSION_14.format(schema=quote_schema(schema)))
    async with opened(schema) as upgraded, opened(other_schema):
        async with session() as conn:
            version = await conn.fetchval(
                f"select version from {quote_schema(schema)}.schema_version"
            )
            same = await schema_structure(conn, schema) == await schema_structure(
                conn, other_schema
            )
        claimed = await upgraded.jobs.claim(ClaimOptions("w-1", {"q": 1}, 30_000))
        (job_claimed,) = claimed.jobs
        acked = await upgraded.jobs.ack(job_claimed.claim)
    assert (version, same) == (SCHEMA_VERSION, True)
    assert (job_claimed.id, acked) == (kept[0].job_id, True)


async def test_a_fan_in_of_a_thousand_children_settled_by_four_workers_at_once(
    schema: str,
) -> None:
    runs: Counter[int] = Counter()
    continued: list[int] = []

    @job(tenant="none", idempotency_key=kid_key, queue=KIDS, retry=Retry(attempts=1))
    async def kid(ctx: JobContext, input: Kid) -> int:
        runs[input.n] += 1
        return input.n

    @job(tenant="none", idempotency_key=fan_key, queue=PARENTS)
    async def fan(ctx: JobContext, input: Fan) -> int:
        results = await ctx.step.map("kids", kid, [Kid(n=n) for n in range(input.count)])
        continued.append(len(results))
        return sum(results)

    apps = [xjobs.App(url_of(schema), jobs=[fan, kid], retention=None) for _ in range(WORKERS)]
    for app in apps:
        await app.__aenter__()
    try:
        enqueued = await fan.enqueue(Fan(key="fan-1", count=FAN))
        await apps[0].run_worker(queues=[PARENTS], until_idle=True)
        parked = await apps[0].get_job(enqueued.job_id)
        await asyncio.gather(
            *(
                app.run_worker(queues=[KIDS, PARENTS], until_idle=True, concurrency=SLOTS)
                for app in apps
            )
        )
        record = await apps[0].get_job(enqueued.job_id)
        total = await enqueued.result()
        backend = apps[0].backend
        assert backend.children is not None
        state = await backend.children.group(enqueued.run_id, "kids")
    finally:
        for app in apps:
            await app.__aexit__(None, None, None)
    async with session() as conn:
        quoted = quote_schema(schema)
        endings = await conn.fetch(
            f"select child_endings, count(*) from {quoted}.jobs "
            "where parent_id is not null group by child_endings"
        )
        completed = await conn.fetchval(
            f"select sum(count) from {quoted}.counters "
            "where tier = 'minute' and name = 'kid' and outcome = 'completed'"
        )
        pending = await conn.fetchval(f"select sum(pending) from {quoted}.child_shards")
    assert parked.state == "waiting"
    assert sorted(runs) == list(range(FAN))
    assert set(runs.values()) == {1}
    assert [(row[0], row[1]) for row in endings] == [(1, FAN)]
    assert (completed, pending) == (FAN, 0)
    assert state is not None
    assert (state.ended, state.failed, state.resolved) == (FAN, 0, True)
    assert continued == [FAN]
    assert (record.state, total) == ("completed", sum(range(FAN)))


async def test_a_cancel_of_the_parent_racing_its_childrens_endings_cancels_every_live_one(
    schema: str,
) -> None:
    ran: list[int] = []
    sixty = asyncio.Event()

    @job(tenant="none", idempotency_key=kid_key, queue=KIDS, retry=Retry(attempts=1))
    async def slow_kid(ctx: JobContext, input: Kid) -> int:
        ran.append(input.n)
        if len(ran) >= 60:
            sixty.set()
        await asyncio.sleep(0.02)
        return input.n

    @job(tenant="none", idempotency_key=fan_key, queue=PARENTS)
    async def fan(ctx: JobContext, input: Fan) -> int:
        results = await ctx.step.map("kids", slow_kid, [Kid(n=n) for n in range(input.count)])
        return sum(results)

    apps = [xjobs.App(url_of(schema), jobs=[fan, slow_kid], retention=None) for _ in range(3)]
    for app in apps:
        await app.__aenter__()
    try:
        enqueued = await fan.enqueue(Fan(key="fan-c", count=300))
        fleet = asyncio.gather(
            *(
                app.run_worker(queues=[KIDS, PARENTS], until_idle=True, concurrency=SLOTS)
                for app in apps
            )
        )
        await sixty.wait()
        cancelled = await apps[0].cancel_job(enqueued.job_id, "enough")
        await fleet
        backend = apps[0].backend
        assert backend.children is not None
        state = await backend.children.group(enqueued.run_id, "kids")
    finally:
        for app in apps:
            await app.__aexit__(None, None, None)
    async with session() as conn:
        rows = await conn.fetch(
            f"select state, count(*) as n from {quote_schema(schema)}.jobs "
            "where parent_id is not null group by state"
        )
    states: dict[str, int] = {row["state"]: row["n"] for row in rows}
    assert cancelled.state == "cancelled"
    assert set(states) <= {"completed", "cancelled"}
    assert sum(states.values()) == 300
    assert states.get("cancelled", 0) > 0
    assert state is not None
    assert state.ended == 300


async def test_a_bulk_cancel_of_parents_cancels_their_children_but_a_detached_one(
    schema: str,
) -> None:
    async with opened(schema) as backend:
        jobs, children, operator = backend.jobs, backend.children, backend.introspection
        assert children is not None
        assert operator is not None
        await jobs.enqueue([new_job("parent", queue=PARENTS)])
        (claimed,) = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        claim = claimed.claim
        waited = ChildGroup(
            claimed.id, claimed.run_id, PARENTS, "kids", 2, wait=True, fail_fast=True
        )
        loose = ChildGroup(
            claimed.id,
            claimed.run_id,
            PARENTS,
            "loose",
            1,
            wait=False,
            fail_fast=False,
            detached=True,
        )
        await children.spawn(claim, waited, 0, [new_job("kid-0"), new_job("kid-1")])
        await children.spawn(claim, loose, 0, [new_job("loose-0")])
        (running,) = (await jobs.claim(ClaimOptions("w-k", {"q": 1}, 30_000))).jobs
        moved = await operator.cancel_many(JobFilter(queue=PARENTS), 10, "stop")
        kids = await children.children_page(claimed.run_id, "kids", -1, 10)
        detached = await children.children_page(claimed.run_id, "loose", -1, 10)
        late = await jobs.ack(running.claim)
        state = await children.group(claimed.run_id, "kids")
    assert moved.moved == 1
    assert [row.state for row in kids] == ["cancelled", "cancelled"]
    assert [row.state for row in detached] == ["ready"]
    assert late is False
    assert state is not None
    assert (state.ended, state.failed) == (2, 2)


async def test_a_group_whose_children_ended_before_the_park_parks_the_parent_due_now(
    schema: str,
) -> None:
    async with opened(schema) as backend:
        jobs, children = backend.jobs, backend.children
        assert children is not None
        (parent,) = await jobs.enqueue([new_job("parent", queue=PARENTS)])
        (claimed,) = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        group = ChildGroup(claimed.id, claimed.run_id, PARENTS, "two", 2, wait=True, fail_fast=True)
        rows = [new_job(f"child-{n}") for n in range(2)]
        spawned = await children.spawn(claimed.claim, group, 0, rows)
        kids = (await jobs.claim(ClaimOptions("w-k", {"q": 2}, 30_000))).jobs
        acked = [await jobs.ack(kid.claim) for kid in kids]
        state = await children.group(claimed.run_id, "two")
        park = Nack("waiting", "suspended", run_at_ms=WAIT_FOREVER_MS, counts_as_attempt=False)
        landed = await children.park(claimed.claim, claimed.run_id, "two", park)
        again = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
    assert (spawned, acked) == (2, [True, True])
    assert state is not None
    assert (state.ended, state.resolved) == (2, True)
    assert landed
    assert [j.id for j in again] == [parent.job_id]


async def test_a_child_ending_after_the_park_makes_the_parked_parent_due(schema: str) -> None:
    async with opened(schema) as backend:
        jobs, children = backend.jobs, backend.children
        assert children is not None
        (parent,) = await jobs.enqueue([new_job("parent", queue=PARENTS)])
        (claimed,) = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        group = ChildGroup(claimed.id, claimed.run_id, PARENTS, "one", 1, wait=True, fail_fast=True)
        await children.spawn(claimed.claim, group, 0, [new_job("child")])
        park = Nack("waiting", "suspended", run_at_ms=WAIT_FOREVER_MS, counts_as_attempt=False)
        landed = await children.park(claimed.claim, claimed.run_id, "one", park)
        early = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        (kid,) = (await jobs.claim(ClaimOptions("w-k", {"q": 1}, 30_000))).jobs
        failed = Nack("dead", "dead-lettered", error="boom")
        await jobs.nack(kid.claim, failed)
        woken = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        state = await children.group(claimed.run_id, "one")
    assert (landed, early) == (True, ())
    assert [j.id for j in woken] == [parent.job_id]
    assert state is not None
    assert (state.failed, state.first_failed, state.resolved) == (1, 0, True)


async def test_the_purge_keeps_the_children_of_a_live_parent_and_takes_a_purged_parents_groups(
    schema: str,
) -> None:
    async with opened(schema) as backend:
        jobs, children, retention = backend.jobs, backend.children, backend.retention
        assert children is not None
        assert retention is not None
        await jobs.enqueue([new_job("parent", queue=PARENTS)])
        (claimed,) = (await jobs.claim(ClaimOptions("w-p", {PARENTS: 1}, 30_000))).jobs
        group = ChildGroup(claimed.id, claimed.run_id, PARENTS, "one", 1, wait=True, fail_fast=True)
        await children.spawn(claimed.claim, group, 0, [new_job("child")])
        (kid,) = (await jobs.claim(ClaimOptions("w-k", {"q": 1}, 30_000))).jobs
        await jobs.ack(kid.claim)
        # Every finished job is past its cut ten days from now.
        later = Retention().cut(int(time.time() * 1000) + 10 * 86_400_000)
        kept = await retention.purge("jobs", later, 100)
        page = await children.children_page(claimed.run_id, "one", -1, 10)
        await jobs.ack(claimed.claim)
        purged = await retention.purge("jobs", later, 100)
        state = await children.group(claimed.run_id, "one")
    assert (kept, [row.state for row in page]) == (0, ["completed"])
    assert (purged, state) == (2, None)


def new_job(key: str, queue: str = "q") -> NewJob:
    """A plain job row of `key` on `queue` (ids made as the facade makes them)."""
    job_id, run_id = new_id_pair()
    return NewJob(
        id=job_id,
        run_id=run_id,
        name="plain",
        queue=queue,
        tenant_id=None,
        idempotency_key=key,
        payload="{}",
        priority=0,
        run_at_ms=None,
        max_attempts=3,
        dead_letter=True,
        enqueued_by=None,
        traceparent=None,
    )
