"""Opening a SQLite `Backend`: the URL read, the two connection threads, the schema, the stores, the wake."""

from __future__ import annotations

import asyncio
from typing import Any

from xjobs.clock import Clock, SystemClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.options import finite_count
from xjobs_sqlite.backfills import SqliteBackfillLedger
from xjobs_sqlite.children import SqliteChildren
from xjobs_sqlite.connection import Connection, linked_version
from xjobs_sqlite.driver import SqliteJobDriver
from xjobs_sqlite.events import SqliteEventBus
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.guards import create_private, refuse_network_filesystem, wal_reset_fixed
from xjobs_sqlite.install import install, is_current
from xjobs_sqlite.introspection import SqliteIntrospection
from xjobs_sqlite.outbox import SqliteOutboxStore
from xjobs_sqlite.rates import SqliteRateStore
from xjobs_sqlite.results import SettleWaiters, SqliteResults
from xjobs_sqlite.retention import SqliteRetention
from xjobs_sqlite.scheduler import SqliteLeader, SqliteSchedulerState
from xjobs_sqlite.slots import SqliteSlotStore
from xjobs_sqlite.steps import SqliteStepStore
from xjobs_sqlite.thread import BUSY_RETRIES, BUSY_TIMEOUT_MS, BusyPolicy
from xjobs_sqlite.url import parse_url
from xjobs_sqlite.wake import DataVersionWake
from xjobs_sqlite.webhooks import SqliteWebhookLedger
from xjobs_sqlite.workers import SqliteWorkerRegistry


def _settings(conn: Connection) -> dict[str, Any]:
    """What the writer's connection runs with, for the operator (`Backend.health`)."""
    (journal_mode,) = conn.execute("pragma journal_mode").fetchone()
    (synchronous,) = conn.execute("pragma synchronous").fetchone()
    (busy_timeout,) = conn.execute("pragma busy_timeout").fetchone()
    (wal_limit,) = conn.execute("pragma journal_size_limit").fetchone()
    return {
        "journal_mode": str(journal_mode),
        "synchronous": {1: "normal", 2: "full"}.get(int(synchronous), str(synchronous)),
        "busy_timeout_ms": int(busy_timeout),
        "wal_size_limit": int(wal_limit),
    }


async def open_backend(
    url: str,
    *,
    clock: Clock | None = None,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    busy_retries: int = BUSY_RETRIES,
    install_schema: bool = True,
    **_: Any,
) -> Backend:
    """A `Backend` over the SQLite file `url` names; the schema is created on first open.

    Time is the injected `clock` (the App's; `SystemClock` by default): SQLite has no server
    clock every process could read, so lease times are each process's clock, as on the memory
    backend. `busy_timeout_ms` is how long SQLite waits for another process's write lock
    (30 s by default) before the driver's `busy_retries` more tries.
    """
    target = parse_url(url)
    refuse_network_filesystem(target.path)
    finite_count("busy_timeout_ms", busy_timeout_ms, minimum=0)
    finite_count("busy_retries", busy_retries, minimum=0)
    create_private(target.path, target.mode)
    clock = clock or SystemClock()
    source = WakeSource(
        activate=lambda: wake.start(asyncio.get_running_loop(), executor.writer.nudge)
    )
    version = linked_version(target.driver)
    wake = DataVersionWake(source, version)
    executor = Executor(target, clock, BusyPolicy(busy_timeout_ms, busy_retries), idle=wake)
    await executor.start()
    try:
        if install_schema and not await executor.read(is_current):
            now = clock.now_ms()
            await executor.write(lambda conn: install(conn, now))
        health = await executor.writer.call(_settings, write=False)
    except BaseException:
        await executor.close()
        raise
    health["path"] = target.path
    health["driver"] = target.driver
    health["sqlite_version"] = ".".join(map(str, version))
    health["wal_reset_fixed"] = wal_reset_fixed(version)

    async def do_install() -> None:
        now = clock.now_ms()
        await executor.write(lambda conn: install(conn, now))

    waiters = SettleWaiters()
    jobs = SqliteJobDriver(executor, source, waiters.settled)
    return Backend(
        name="sqlite",
        url=url,
        clock=clock,
        jobs=jobs,
        workers=SqliteWorkerRegistry(executor),
        slots=SqliteSlotStore(executor),
        rates=SqliteRateStore(executor),
        steps=SqliteStepStore(executor),
        events=SqliteEventBus(executor, source),
        retention=SqliteRetention(executor),
        outbox=SqliteOutboxStore(executor, source),
        backfills=SqliteBackfillLedger(executor),
        webhooks=SqliteWebhookLedger(executor),
        children=SqliteChildren(executor, source),
        results=SqliteResults(executor, jobs, waiters),
        scheduler=SqliteSchedulerState(executor, source),
        leader=SqliteLeader(executor),
        introspection=SqliteIntrospection(executor, source, waiters.settled),
        wake=source,
        on_close=executor.close,
        on_install=do_install,
        features=frozenset({"ack_many"}),
        health=health,
    )
