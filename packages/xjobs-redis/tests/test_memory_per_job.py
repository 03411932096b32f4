"""W7 (performance.md): bytes per stored small job on Redis, and what a finished job leaves behind.

100,000 small jobs are enqueued through the app's bulk enqueue (batches of 1,000) under a fresh
key prefix, and `INFO memory` is read before and after. The accounting, honestly:

- `used_memory` is server-wide (a db number would not isolate it), on the session's shared test
  server. Nothing else runs during the test (pytest runs one test at a time, and the keys other
  tests left are static), so the delta is this test's keys, plus whatever the server's own
  structures grew by for them (the keyspace dict's buckets, which are a real per-key cost) — and
  minus nothing: no `FLUSHDB`, so other tests' keys are untouched.
- Client buffers are not job storage: a 1,000-row batch leaves a query buffer of a few hundred
  KiB on its connection until the server trims it. `mem_clients_normal` is taken out of both
  readings; the raw delta is printed beside it.
- Script memory (the Lua VM) is outside `used_memory`.

Then every job is completed through the public driver API (claims and fenced acks, the calls a
worker makes, without the per-job overhead of running bodies; two completer processes side by
side, to keep the file near a minute), and the keys left under
the prefix are checked against what the driver keeps for a finished job. Reading `ack.lua` and
`lib.lua`: an ack sets the job HASH `completed` (with `finished_at_ms`), drops `lease_until_ms`,
takes it out of the `leased` ZSET, releases its idempotency namespace from the `live` HASH, and
files it in the queue's `completed` ZSET (score `created_at_ms`), takes it out of the `created`
ZSET of live jobs, and moves the queue's minute counter (a HASH and its index ZSET, both with an
expiry: the counters' retention). Nothing else sets an expiry and no driver call purges jobs: the
retention of a finished job is FOREVER (until an operator removes it). So "no key past retention"
is asserted as exactly that: the job HASHes, the `completed` ZSET and the queue SET, with no TTL
on any of them, the two counter keys, expiring, and nothing else — the emptied `ready`,
`leased`, `live` and `created` keys are gone, and a job that never failed has no attempt errors.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from xjobs.contract.backend import Backend
from xjobs_redis.backend import open_backend
from xjobs_redis.keys import Keys
from xjobs_redis.servers import ServerUnavailable, redis_url, unavailable
from xjobs_redis.testing import drop_prefix

JOBS = 100_000
BATCH = 1_000
ACKS_AT_ONCE = 25  # concurrent acks per completer (one pooled connection each)
CLAIM_BATCH = 100  # jobs per claim (a claim of 1,000 blocks Redis ~0.1 s sorting in Lua)
COMPLETERS = 2
LIMIT_BYTES_PER_JOB = 1024  # performance.md, W7: under 1 KiB per small job
QUEUE = "w7"
LEASE_MS = 600_000  # longer than the test: no claim in it lapses


class Small(BaseModel):
    n: int


@xjobs.job(tenant="none", idempotency_key=lambda s: f"s-{s.n}", queue=QUEUE)
async def small(ctx: xjobs.JobContext, input: Small) -> None:
    """Never run here: the jobs are completed through the driver."""


@dataclass
class Stored:
    url: str
    keys: Keys
    backend: Backend
    admin: Redis


@pytest_asyncio.fixture
async def stored() -> AsyncIterator[Stored]:
    try:
        url = redis_url()
    except ServerUnavailable as exc:
        unavailable(f"no Redis server for W7: {exc}")
    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    admin = Redis.from_url(url, decode_responses=True)
    backend = await open_backend(url, prefix=prefix)
    try:
        yield Stored(url, Keys(prefix), backend, admin)
    finally:
        await backend.close()
        await drop_prefix(admin, prefix)
        await admin.aclose()


async def job_memory(admin: Redis) -> tuple[int, int]:
    """(`used_memory` less the clients' buffers, raw `used_memory`), in bytes."""
    info = await admin.info("memory")
    used = int(info["used_memory"])
    return used - int(info.get("mem_clients_normal", 0)), used


async def usage(admin: Redis, key: str, samples: int) -> int:
    """`MEMORY USAGE` of a key that exists."""
    found = await admin.memory_usage(key, samples=samples)
    assert found is not None, f"{key} does not exist"
    return int(found)


async def keys_under(admin: Redis, prefix: str) -> list[str]:
    return [str(k) async for k in admin.scan_iter(match=f"{prefix}:*", count=5000)]


# One completer: claims of CLAIM_BATCH and fenced acks, ACKS_AT_ONCE at a time, until the queue
# is empty; prints (claimed, acked). The Python client is the bottleneck (parsing claim replies,
# one round trip per ack), so two run side by side, in processes of their own, on a 2-core box.
COMPLETER = """
import asyncio, json, sys
from xjobs.contract.driver import ClaimOptions
from xjobs_redis.backend import open_backend

async def main(url, prefix, queue, worker_id, batch, at_once):
    backend = await open_backend(url, prefix=prefix)
    claimed = acked = 0
    try:
        while True:
            options = ClaimOptions(worker_id, {queue: batch}, LEASE_MS, limit=batch)
            result = await backend.jobs.claim(options)
            if not result.jobs:
                break
            assert not result.buried
            claimed += len(result.jobs)
            for start in range(0, len(result.jobs), at_once):
                chunk = result.jobs[start : start + at_once]
                acked += sum(await asyncio.gather(*(backend.jobs.ack(j.claim) for j in chunk)))
    finally:
        await backend.close()
    print(json.dumps([claimed, acked]))

url, prefix, queue, worker_id, batch, at_once = sys.argv[1:]
asyncio.run(main(url, prefix, queue, worker_id, int(batch), int(at_once)))
""".replace("LEASE_MS", str(LEASE_MS))


async def complete_all(url: str, prefix: str) -> list[tuple[int, int]]:
    """Run COMPLETERS completer processes to the end: each one's (claimed, acked)."""
    args = [url, prefix, QUEUE]
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            COMPLETER,
            *args,
            f"w7-completer-{n}",
            str(CLAIM_BATCH),
            str(ACKS_AT_ONCE),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(COMPLETERS)
    ]
    counts: list[tuple[int, int]] = []
    for process in processes:
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode(errors="replace")
        claimed, acked = json.loads(out)
        counts.append((int(claimed), int(acked)))
    return counts


async def finished_jobs(admin: Redis, keys: list[str]) -> Counter[tuple[object, ...]]:
    """Each job key's (state, no lease, finished_at set, claims, PTTL), counted; pipelined."""
    seen: Counter[tuple[object, ...]] = Counter()
    for start in range(0, len(keys), 5000):
        async with admin.pipeline(transaction=False) as pipe:
            for key in keys[start : start + 5000]:
                pipe.hmget(key, "state", "lease_until_ms", "finished_at_ms", "claims")
                pipe.pttl(key)
            replies = await pipe.execute()
        for (state, lease, finished, claims), ttl in zip(replies[::2], replies[1::2], strict=True):
            seen[(state, lease is None, finished is not None, claims, ttl)] += 1
    return seen


@pytest.mark.asyncio
async def test_a_small_job_costs_under_1_kib_and_a_finished_one_leaves_only_what_is_retained(
    stored: Stored,
) -> None:
    k, admin = stored.keys, stored.admin
    async with xjobs.App(stored.backend, jobs=[small]) as app:
        await app.enqueue_many(small, [Small(n=-1)])  # the queue's keys exist before the reading
        baseline, baseline_raw = await job_memory(admin)
        started = time.monotonic()
        for start in range(0, JOBS, BATCH):
            results = await app.enqueue_many(
                small, [Small(n=n) for n in range(start, start + BATCH)]
            )
            assert not any(r.deduped for r in results)
        enqueued_s = time.monotonic() - started
        loaded, loaded_raw = await job_memory(admin)
        sample_id = results[-1].job_id
        job_bytes = await usage(admin, k.job(QUEUE, sample_id), 0)
        ready_bytes = await usage(admin, k.ready(QUEUE), 0)
        live_bytes = await usage(admin, k.live(QUEUE), 0)
        # a job enqueued due now at priority 0 waits in `ready` in creation order: no `created`
        assert not await admin.exists(k.created(QUEUE))
        sample_payload = (await app.get_job(sample_id)).payload

        started = time.monotonic()
        counts = await complete_all(stored.url, k.prefix)
        completed_s = time.monotonic() - started
        finished, _ = await job_memory(admin)
        completed_bytes = await usage(admin, k.finished(QUEUE, "completed"), 0)
        job_after = await usage(admin, k.job(QUEUE, sample_id), 0)

    per_job = (loaded - baseline) / JOBS
    per_job_raw = (loaded_raw - baseline_raw) / JOBS
    retained = (finished - baseline) / JOBS
    print(
        f"\nW7: {JOBS:,} small jobs (payload {sample_payload}) enqueued in {enqueued_s:.1f} s: "
        f"{per_job:.0f} bytes per job ({per_job_raw:.0f} raw, clients' buffers included); "
        f"MEMORY USAGE: one job HASH {job_bytes} B, ready ZSET {ready_bytes / JOBS:.0f} B/job, "
        f"live HASH {live_bytes / JOBS:.0f} B/job; "
        f"completed all in {completed_s:.1f} s by {counts}; "
        f"a completed job keeps {retained:.0f} bytes (HASH {job_after} B, completed ZSET "
        f"{completed_bytes / JOBS:.0f} B/job), retained with no expiry"
    )
    assert per_job < LIMIT_BYTES_PER_JOB, f"{per_job:.0f} bytes per stored small job"
    # every job claimed once across the completers, and every ack landed
    assert sum(c for c, _ in counts) == JOBS + 1, counts
    assert sum(a for _, a in counts) == JOBS + 1, counts

    # What is left: exactly what the driver retains for finished jobs, forever.
    left = await keys_under(admin, k.prefix)
    job_keys = [key for key in left if ":job:" in key]
    others = sorted(set(left) - set(job_keys))
    counters = [k.counters(QUEUE, "minute"), k.counter_index(QUEUE, "minute")]
    kept = [k.finished(QUEUE, "completed"), k.queues(), k.joined(QUEUE), *counters]
    assert others == sorted(kept)
    for key in counters:  # the counters expire with their retention (2 days past the bucket)
        assert 0 < await admin.pttl(key) <= 2 * 86_400_000 + 60_000
    assert len(job_keys) == JOBS + 1
    # every one completed, its lease gone, claimed once, and no expiry (PTTL -1): kept forever
    assert await finished_jobs(admin, job_keys) == {("completed", True, True, "1", -1): JOBS + 1}
    assert await admin.pttl(k.finished(QUEUE, "completed")) == -1
    assert await admin.zcard(k.finished(QUEUE, "completed")) == JOBS + 1
    assert await admin.smembers(k.queues()) == {QUEUE}
    emptied_keys = (k.ready(QUEUE), k.delayed(QUEUE), k.leased(QUEUE), k.live(QUEUE))
    for emptied in (*emptied_keys, k.created(QUEUE), k.errors(QUEUE)):
        assert not await admin.exists(emptied), f"{emptied} outlived its last job"
