"""The idle cost budget (semantics.md, "The wake (Postgres)"): statements an idle worker, an idle
relay and an idle scheduler leader issue.

Worker: 30 statements per idle minute without the wake, 12 with it. Rather than sleeping a
minute, each test lets the idle backoff climb to its ceiling (2 s, or 5 s while the wake is
proven live), then counts every statement the pool runs over a window of whole ceilings: at the
ceiling an idle worker makes one claim per ceiling, so a window of W seconds holds at most
W / ceiling + 1 of them (the +1 is the tick the window's edge may catch), which is the
per-minute budget scaled to W.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from pydantic import BaseModel

import xjobs
from xjobs.contract.backend import Backend
from xjobs.roles.idle_wait import CEILING_MS, CEILING_WITH_WAKE_MS
from xjobs.roles.scheduler_options import resolve_scheduler_options
from xjobs.roles.worker_options import DEFAULT_POLL_FLOOR
from xjobs_pg.backend import asyncpg_dsn, open_backend
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_pg.sql import Statements

BUDGET_WITHOUT_WAKE = 30  # statements per idle minute
BUDGET_WITH_WAKE = 12
WINDOW_WITHOUT_WAKE_S = 10.0  # five ceilings of 2 s
WINDOW_WITH_WAKE_S = 15.0  # three ceilings of 5 s
WARM_UP_MARGIN_S = 1.0
LIVE_WITHIN_S = 10.0
QUEUE = "idle-budget"
SCHEDULER_BUDGET = 6  # statements per idle minute, at the default renew_every (10 s)
SCHEDULER_RENEW_S = 0.5
SCHEDULER_WINDOW_S = 6.0


class Nothing(BaseModel):
    key: str = "k"


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key, queue=QUEUE)
async def never_enqueued(ctx: xjobs.JobContext, input: Nothing) -> None:
    """Registered so the worker serves its queue; no test enqueues it."""


yearly = xjobs.task(
    job=never_enqueued,
    cron="0 0 1 1 *",
    tz="UTC",
    input=lambda occurrence: Nothing(key=occurrence.isoformat()),
    name="idle.yearly",
)


@dataclass(eq=False)  # asyncpg keeps its loggers in a set: hashed by identity
class StatementLog:
    """An asyncpg query logger: when each statement a pool connection ran finished, and which it was."""

    names: dict[str, str]
    seen: list[tuple[float, str]] = field(default_factory=list)

    def __call__(self, record: Any) -> None:
        query = str(record.query)
        self.seen.append((time.monotonic(), self.names.get(query, " ".join(query.split())[:60])))

    def since(self, start: float) -> Counter[str]:
        """Statements by name that finished at or after `start` (monotonic seconds)."""
        return Counter(name for at, name in self.seen if at >= start)


@dataclass
class Idle:
    """A fresh schema on the test server and a statement log to open a backend with."""

    url: str
    schema: str
    log: StatementLog


def warm_up_s(floor_ms: int, ceiling_ms: int) -> float:
    """How long an idle loop takes from its floor until every wait is the ceiling (doubling)."""
    total_ms, wait_ms = 0, floor_ms
    while wait_ms < ceiling_ms:
        total_ms += wait_ms
        wait_ms *= 2
    return total_ms / 1000 + WARM_UP_MARGIN_S


@pytest_asyncio.fixture
async def idle() -> AsyncIterator[Idle]:
    try:
        url = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the idle budget: {exc}")
    schema = f"xjobs_t_{secrets.token_hex(6)}"
    statements = Statements(quote_schema(schema))
    names = {statements[name]: name for name in statements.names()}
    yield Idle(url, schema, StatementLog(names))
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
    finally:
        await conn.close()


async def count_idle_window(
    app: xjobs.App, log: StatementLog, *, ceiling_ms: int, window_s: float, wake_live: Any = None
) -> Counter[str]:
    """Start a worker, wait until its backoff waits at `ceiling_ms`, then count the statements of a window."""
    worker = app.worker()
    await worker.start()
    try:
        if wake_live is not None:
            deadline = time.monotonic() + LIVE_WITHIN_S
            while not wake_live():
                assert time.monotonic() < deadline, (
                    f"the wake was not proven within {LIVE_WITHIN_S} s"
                )
                await asyncio.sleep(0.05)
        # Proving the wake emits a re-scan, which resets the backoff: the warm-up starts here.
        await asyncio.sleep(warm_up_s(worker.options.poll_floor_ms, ceiling_ms))
        start = time.monotonic()
        await asyncio.sleep(window_s)
        counted = log.since(start)
        if wake_live is not None:
            assert wake_live(), "the wake went unproven during the window"
        assert worker.state == "running"
        assert worker.stats.claimed == 0
    finally:
        await worker.stop()
    return counted


def report(label: str, counted: Counter[str], window_s: float, budget: int) -> None:
    per_minute = sum(counted.values()) * 60 / window_s
    print(
        f"\nidle {label}: {sum(counted.values())} statements in {window_s:.0f} s "
        f"= {per_minute:.1f}/min (budget {budget}/min); by statement: {dict(counted)}"
    )


def assert_within_budget(counted: Counter[str], window_s: float, budget: int) -> None:
    total = sum(counted.values())
    # The budget scaled to the window, plus the one tick its edge may catch.
    allowed = budget * window_s / 60 + 1
    assert total <= allowed, (
        f"{total} statements in {window_s} s idle is over {budget}/min: {dict(counted)}"
    )
    assert (total - 1) * 60 / window_s <= budget
    assert counted["claim"] > 0, "an idle worker must keep polling: the poll is the guarantee"


@pytest.mark.asyncio
async def test_an_idle_worker_without_the_wake_issues_at_most_30_statements_a_minute(
    idle: Idle,
) -> None:
    opened = await open_backend(idle.url, schema=idle.schema, on_query=idle.log)
    # The same stores with no wake source: the worker never subscribes, so no LISTEN session.
    backend: Backend = dataclasses.replace(opened, wake=None)
    assert "wake" not in backend.capabilities
    try:
        async with xjobs.App(backend, jobs=[never_enqueued]) as app:
            counted = await count_idle_window(
                app, idle.log, ceiling_ms=CEILING_MS, window_s=WINDOW_WITHOUT_WAKE_S
            )
    finally:
        await opened.close()
    report("worker without the wake", counted, WINDOW_WITHOUT_WAKE_S, BUDGET_WITHOUT_WAKE)
    assert_within_budget(counted, WINDOW_WITHOUT_WAKE_S, BUDGET_WITHOUT_WAKE)


@pytest.mark.asyncio
async def test_an_idle_worker_with_the_wake_live_issues_at_most_12_statements_a_minute(
    idle: Idle,
) -> None:
    app = xjobs.App(
        backend=idle.url,
        jobs=[never_enqueued],
        backend_options={"schema": idle.schema, "on_query": idle.log},
    )
    async with app:
        wake = app.backend.wake
        assert wake is not None
        counted = await count_idle_window(
            app,
            idle.log,
            ceiling_ms=CEILING_WITH_WAKE_MS,
            window_s=WINDOW_WITH_WAKE_S,
            wake_live=lambda: wake.live,
        )
    report("worker with the wake live", counted, WINDOW_WITH_WAKE_S, BUDGET_WITH_WAKE)
    assert_within_budget(counted, WINDOW_WITH_WAKE_S, BUDGET_WITH_WAKE)


def test_the_warm_up_covers_the_doubling_from_the_default_floor_to_each_ceiling() -> None:
    floor_ms = int(DEFAULT_POLL_FLOOR.total_seconds() * 1000)
    # 50+100+…+1600 ms below 2 s; 50+…+3200 ms below 5 s; each plus the margin
    assert warm_up_s(floor_ms, CEILING_MS) == pytest.approx(3.15 + WARM_UP_MARGIN_S)
    assert warm_up_s(floor_ms, CEILING_WITH_WAKE_MS) == pytest.approx(6.35 + WARM_UP_MARGIN_S)


@pytest.mark.asyncio
async def test_an_idle_scheduler_leader_only_renews_its_lease(idle: Idle) -> None:
    """Between occurrences the leader issues one lease renewal per `renew_every` and nothing else:
    6 statements a minute at the default 10 s. The test renews every 0.5 s to count many."""
    # retention=None: the default purge task fires every five minutes, and a window that crosses
    # one would count its fire; the budget is pinned for the leader between occurrences
    app = xjobs.App(
        backend=idle.url,
        tasks=[yearly],
        retention=None,
        backend_options={"schema": idle.schema, "on_query": idle.log},
    )
    async with app:
        scheduler = app.scheduler(
            renew_every=timedelta(seconds=SCHEDULER_RENEW_S),
            leader_ttl=timedelta(seconds=SCHEDULER_RENEW_S * 4),
        )
        assert 60_000 // resolve_scheduler_options().renew_every_ms == SCHEDULER_BUDGET
        await scheduler.start()
        try:
            await asyncio.sleep(SCHEDULER_RENEW_S * 2)  # it leads and has read the watermarks
            assert scheduler.leading
            start = time.monotonic()
            await asyncio.sleep(SCHEDULER_WINDOW_S)
            counted = idle.log.since(start)
        finally:
            await scheduler.stop()
    per_minute_default = sum(counted.values()) * SCHEDULER_RENEW_S / SCHEDULER_WINDOW_S * 6
    print(
        f"\nidle scheduler leader: {dict(counted)} in {SCHEDULER_WINDOW_S:.0f} s "
        f"= {per_minute_default:.1f}/min at renew_every=10 s (budget {SCHEDULER_BUDGET}/min)"
    )
    assert set(counted) == {"leader_acquire"}, f"an idle round touched a store: {dict(counted)}"
    assert counted["leader_acquire"] <= SCHEDULER_WINDOW_S / SCHEDULER_RENEW_S + 1
    assert counted["leader_acquire"] >= SCHEDULER_WINDOW_S / SCHEDULER_RENEW_S - 1


async def count_idle_relay(
    app: xjobs.App, log: StatementLog, *, ceiling_ms: int, window_s: float
) -> Counter[str]:
    """Start a relay, wait until its backoff waits at `ceiling_ms`, then count a window's statements."""
    relay = app.relay()
    await relay.start()
    try:
        await asyncio.sleep(warm_up_s(relay.options.poll_floor_ms, ceiling_ms))
        start = time.monotonic()
        await asyncio.sleep(window_s)
        counted = log.since(start)
        assert relay.state == "running"
        assert relay.stats.published == 0
    finally:
        await relay.stop()
    return counted


@pytest.mark.asyncio
async def test_an_idle_relay_without_the_wake_issues_at_most_30_statements_a_minute(
    idle: Idle,
) -> None:
    opened = await open_backend(idle.url, schema=idle.schema, on_query=idle.log)
    backend: Backend = dataclasses.replace(opened, wake=None)
    try:
        async with xjobs.App(backend, jobs=[never_enqueued]) as app:
            counted = await count_idle_relay(
                app, idle.log, ceiling_ms=CEILING_MS, window_s=WINDOW_WITHOUT_WAKE_S
            )
    finally:
        await opened.close()
    report("relay without the wake", counted, WINDOW_WITHOUT_WAKE_S, BUDGET_WITHOUT_WAKE)
    assert set(counted) == {"outbox_claim"}, f"an idle relay pass is one claim: {dict(counted)}"
    assert sum(counted.values()) <= BUDGET_WITHOUT_WAKE * WINDOW_WITHOUT_WAKE_S / 60 + 1


@pytest.mark.asyncio
async def test_an_idle_relay_with_the_wake_live_issues_at_most_12_statements_a_minute(
    idle: Idle,
) -> None:
    app = xjobs.App(
        backend=idle.url,
        jobs=[never_enqueued],
        backend_options={"schema": idle.schema, "on_query": idle.log},
    )
    async with app:
        wake = app.backend.wake
        assert wake is not None
        relay = app.relay()
        await relay.start()  # subscribing starts the LISTEN session, which proves the wake
        deadline = time.monotonic() + LIVE_WITHIN_S
        while not wake.live:
            assert time.monotonic() < deadline, f"the wake was not proven within {LIVE_WITHIN_S} s"
            await asyncio.sleep(0.05)
        await relay.stop()
        counted = await count_idle_relay(
            app, idle.log, ceiling_ms=CEILING_WITH_WAKE_MS, window_s=WINDOW_WITH_WAKE_S
        )
        assert wake.live, "the wake went unproven during the window"
    report("relay with the wake live", counted, WINDOW_WITH_WAKE_S, BUDGET_WITH_WAKE)
    assert set(counted) <= {"outbox_claim"}, f"an idle relay pass is one claim: {dict(counted)}"
    assert sum(counted.values()) <= BUDGET_WITH_WAKE * WINDOW_WITH_WAKE_S / 60 + 1
    assert counted["outbox_claim"] > 0, "an idle relay must keep polling: the poll is the guarantee"
