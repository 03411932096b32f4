"""W7, retention: a finished job's keys carry the expiry its settle set, and after its keep and a purge no key, index member or field of it is left (a keyspace scan)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import BaseModel
from redis.asyncio import Redis

from xjobs import App, JobContext, Retry, Terminal, job
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.retention import Retention
from xjobs.testing.rows import new_job

pytestmark = pytest.mark.asyncio

KEEP = timedelta(milliseconds=1500)
POLICY = Retention(completed=KEEP, cancelled=KEEP, failed=KEEP, dead=KEEP, queue="ret")


class Item(BaseModel):
    key: str


def _key(item: Item) -> str:
    return item.key


@job(tenant="none", idempotency_key=_key, queue="ret")
async def stepped(ctx: JobContext, item: Item) -> str:
    return await ctx.step.run("first", lambda: f"done {item.key}")


@job(tenant="none", idempotency_key=_key, queue="ret", retry=Retry(attempts=1))
async def dies(ctx: JobContext, item: Item) -> None:
    await ctx.step.run("before", lambda: 1)
    raise RuntimeError("dead-lettered after one attempt")


@job(tenant="none", idempotency_key=_key, queue="ret", retry=Retry(dead_letter=False))
async def drops(ctx: JobContext, item: Item) -> None:
    raise Terminal("failed for good")


async def _keys(client: Redis, prefix: str) -> list[str]:
    return sorted([str(k) async for k in client.scan_iter(match=f"{prefix}:*", count=1000)])


async def _mentions(client: Redis, key: str, ids: set[str]) -> set[str]:
    """Which of `ids` the key's name, members or fields name."""
    kind = await client.type(key)
    names: list[str] = [key]
    if kind == "zset":
        names += [str(m) for m in await client.zrange(key, 0, -1)]
    elif kind == "hash":
        names += [str(f) for f in await client.hkeys(key)]
        names += [str(v) for v in await client.hvals(key)]
    elif kind == "set":
        names += [str(m) for m in await client.smembers(key)]
    return {i for i in ids if any(i in n for n in names)}


async def _bury_one(backend: Backend) -> tuple[str, str]:
    """A lapsed lease on its final attempt, buried by the next claim (the claim's own ending)."""
    row = new_job(name="buried", queue="ret", idempotency_key="buried", max_attempts=1)
    await backend.jobs.enqueue([row])
    taken = await backend.jobs.claim(ClaimOptions("worker-a", {"ret": 1}, lease_ms=50))
    assert [j.id for j in taken.jobs] == [row.id]
    await asyncio.sleep(0.12)
    claim = await backend.jobs.claim(ClaimOptions("worker-b", {"ret": 1}, lease_ms=50))
    assert [b.id for b in claim.buried] == [row.id]
    return row.id, row.run_id


async def test_no_key_of_a_finished_job_is_left_after_its_retention(
    server_backend: Backend, client: Redis, prefix: str
) -> None:
    """A job ended by its run's settle (completed with steps and a result, dead, dropped) expires
    with its steps; a requeued job is live again and keeps its keys; after the keep and one purge
    pass no key, index member or field names a finished job (cancelled and buried included) or its
    run."""
    async with App(server_backend, jobs=[stepped, dies, drops], retention=POLICY) as app:
        finished = [
            await app.enqueue(stepped, Item(key="a")),
            await app.enqueue(stepped, Item(key="b")),
            await app.enqueue(dies, Item(key="c")),
            await app.enqueue(drops, Item(key="d")),
        ]
        requeued = await app.enqueue(stepped, Item(key="requeued"))
        cancelled = await app.enqueue(stepped, Item(key="e"), delay=timedelta(hours=1))
        await app.cancel_job(cancelled.job_id)
        finished.append(cancelled)
        await app.run_worker(until_idle=True, handle_signals=False)
        buried = await _bury_one(server_backend)
        states = {(await app.get_job(r.job_id)).state for r in finished}
        assert states == {"completed", "dead", "failed", "cancelled"}
        settled = finished[:4]  # ended by their run's settle: completed, dead, failed
        q = f"{prefix}:{{{prefix}:ret}}"
        for r in settled:
            for key in (f"{q}:job:{r.job_id}", f"{q}:steps:{r.run_id}"):
                assert 0 < await client.pttl(key) <= 1500 or not await client.exists(key)
            assert await client.pttl(f"{q}:job:{r.job_id}") > 0
        # A cancel and a burial name no run: those jobs keep no expiry, the purge takes them.
        assert await client.pttl(f"{q}:job:{cancelled.job_id}") == -1
        assert await client.pttl(f"{q}:job:{buried[0]}") == -1
        await app.requeue_job(requeued.job_id)
        ids = {r.job_id for r in finished} | {r.run_id for r in finished} | set(buried)
        await asyncio.sleep(1.7)
        # Before any purge, the expiry alone took the settled jobs' HASHes and steps HASHes.
        for r in settled:
            assert not await client.exists(f"{q}:job:{r.job_id}", f"{q}:steps:{r.run_id}")
        report = await app.purge()
        assert report["jobs"] == len(finished) + 1
        left: dict[str, set[str]] = {}
        for key in await _keys(client, prefix):
            named = await _mentions(client, key, ids)
            if named:
                left[key] = named
        assert left == {}
        kept = await app.get_job(requeued.job_id)
        assert kept.state == "ready"
        assert await client.pttl(f"{q}:job:{requeued.job_id}") == -1
        assert await client.pttl(f"{q}:steps:{requeued.run_id}") == -1  # its step, kept for good
