"""Opening a Postgres `Backend`: the pool, the schema (installed when missing), the stores, the operator surface, the results and the wake."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from xjobs.clock import Clock, SystemClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.options import finite_count
from xjobs_pg import wake_slots
from xjobs_pg.backfills import PostgresBackfillLedger
from xjobs_pg.children import PostgresChildren
from xjobs_pg.driver import PostgresJobDriver
from xjobs_pg.errors import interpret_error
from xjobs_pg.events import PostgresEventBus
from xjobs_pg.executor import Executor
from xjobs_pg.install import SCHEMA_VERSION, install
from xjobs_pg.introspection import PostgresIntrospection
from xjobs_pg.outbox import PostgresOutboxStore
from xjobs_pg.pooling import Pooling, behind_proxy, refused_startup_setting, undeclared_proxy
from xjobs_pg.purge import PostgresRetention
from xjobs_pg.rates import PostgresRateStore
from xjobs_pg.results import PostgresResults, SettleWaiters
from xjobs_pg.scheduler import PostgresAdvisoryLeader, PostgresLeaseLeader, PostgresSchedulerState
from xjobs_pg.schema import DEFAULT_SCHEMA, quote_schema, settled_channel, wake_channel
from xjobs_pg.slots import PostgresSlotStore
from xjobs_pg.sql import Statements
from xjobs_pg.steps import PostgresStepStore
from xjobs_pg.wake import WakeListener
from xjobs_pg.webhooks import PostgresWebhookLedger
from xjobs_pg.workers import PostgresWorkerRegistry

QueryLogger = Callable[[Any], None]


def asyncpg_dsn(url: str) -> tuple[str, dict[str, str]]:
    """The URL as asyncpg takes it (`postgres://`), with `xjobs_*` query options split off."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    ours = {k.removeprefix("xjobs_"): v for k, v in query if k.startswith("xjobs_")}
    rest = [(k, v) for k, v in query if not k.startswith("xjobs_")]
    return urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(rest), "")), ours


async def _no_reset(_conn: asyncpg.Connection) -> None:
    """A released connection needs no server round trip: xjobs never changes session state."""


async def open_backend(
    url: str,
    *,
    clock: Clock | None = None,
    schema: str | None = None,
    min_size: int = 1,
    max_size: int = 20,
    install_schema: bool = True,
    on_query: QueryLogger | None = None,
    **connect: Any,
) -> Backend:
    """A `Backend` over Postgres at `url`; the schema is installed unless `install_schema=False`.

    Size the pool above the worker's concurrency plus a few: heartbeats and settles share it.
    Behind a pooling proxy the URL declares it (`xjobs_pooler`, see `pooling`); an undeclared
    proxy is refused before anything is written.
    """
    dsn, options = asyncpg_dsn(url)
    pooling = Pooling.from_options(options)
    connect = pooling.connect_options(connect)
    name = schema or options.get("schema", DEFAULT_SCHEMA)
    quoted = quote_schema(name)
    finite_count("min_size", min_size, minimum=0)
    finite_count("max_size", max_size, minimum=max(min_size, 1))
    clock = clock or SystemClock()

    async def init(conn: asyncpg.Connection) -> None:
        if on_query is not None:
            conn.add_query_logger(on_query)

    try:
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            init=init,
            reset=_no_reset,
            **pooling.pool_options(connect),
        )
    except Exception as exc:
        if pooling.mode == "none" and refused_startup_setting(exc):
            raise undeclared_proxy(urlsplit(dsn).hostname or "the URL's host") from exc
        raise interpret_error(exc) from exc
    executor = Executor(pool, Statements(quoted), clock)
    if pooling.mode == "none":
        await _refuse_undeclared_proxy(pool, executor, dsn)

    async def do_install() -> None:
        async with pool.acquire() as conn:
            await install(conn, quoted)

    if install_schema:
        await _ensure_installed(executor, do_install)
    channel = wake_channel(name)
    slots = wake_slots.for_channel(channel)
    source = WakeSource(activate=lambda: listener.start())
    settled = settled_channel(name)
    waiters = SettleWaiters()
    listener = WakeListener(
        dsn,
        channel,
        source,
        executor,
        settled_channel=settled,
        on_settled=waiters.settled,
        listens=pooling.listens,
        **connect,
    )

    async def close() -> None:
        await listener.close()
        await executor.close()

    jobs = PostgresJobDriver(executor, slots)
    return Backend(
        name="postgres",
        url=url,
        clock=clock,
        jobs=jobs,
        workers=PostgresWorkerRegistry(executor),
        slots=PostgresSlotStore(executor),
        rates=PostgresRateStore(executor),
        steps=PostgresStepStore(executor),
        events=PostgresEventBus(executor, slots),
        outbox=PostgresOutboxStore(executor, slots),
        scheduler=PostgresSchedulerState(executor, slots),
        leader=PostgresLeaseLeader(executor),
        introspection=PostgresIntrospection(executor, jobs, slots),
        results=PostgresResults(executor, listener, waiters, settled),
        wake=source,
        retention=PostgresRetention(executor),
        backfills=PostgresBackfillLedger(executor),
        webhooks=PostgresWebhookLedger(executor),
        children=PostgresChildren(executor, slots),
        on_close=close,
        on_install=do_install,
        features=frozenset({"ack_many"}),
    )


def postgres_advisory_leader(
    url: str, *, key: str | None = None, **connect: Any
) -> PostgresAdvisoryLeader:
    """A leader holding a session advisory lock on one dedicated connection to `url` (not a pool).

    `key` names the lock (hashed by the server); the default is `<schema>.scheduler` for the URL's
    schema. Refused (`LeaderUnsafeError`) behind a transaction-pooling proxy: at once when the URL
    declares one (`xjobs_pooler=transaction`), at each acquire when its connection finds an
    undeclared proxy (a session-pooling one is declared with `xjobs_pooler=session`).
    """
    dsn, options = asyncpg_dsn(url)
    pooling = Pooling.from_options(options)
    pooling.refuse_session_leader("the advisory-lock leader")
    name = options.get("schema", DEFAULT_SCHEMA)
    statements = Statements(quote_schema(name))
    return PostgresAdvisoryLeader(
        dsn,
        key or f"{name}.scheduler",
        statements,
        proxy_declared=pooling.mode == "session",
        **pooling.connect_options(connect),
    )


async def _refuse_undeclared_proxy(pool: asyncpg.Pool, executor: Executor, dsn: str) -> None:
    """Refuse (the pool closed) when the URL declares no proxy and one answers (one statement)."""
    try:
        async with pool.acquire() as conn:
            proxied = await behind_proxy(conn, executor.sql)
        if proxied:
            raise undeclared_proxy(urlsplit(dsn).hostname or "the URL's host")
    except BaseException:
        pool.terminate()
        raise


async def _ensure_installed(executor: Executor, do_install: Callable[[], Any]) -> None:
    """One statement when the schema is current; the DDL when it is missing or older."""
    try:
        row = await executor.fetchrow("installed_version")
    except Exception:
        row = None
    if row is None or row["version"] < SCHEMA_VERSION:
        await do_install()
