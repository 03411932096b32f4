"""End to end: the transactional outbox on real Postgres, with psycopg (sync and async) and asyncpg.

A job staged in the caller's transaction runs once that transaction commits, and never when it
rolls back; a relay killed with `kill -9` between publishing and marking leaves a row that the
next relay publishes again, deduped, so the job runs once; two relays at once publish each row
once; a Postgres outbox feeds a Redis queue.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psycopg
import pytest

import xjobs
from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema

HERE = Path(__file__).parent
WAIT_S = 30.0
POLL_S = 0.05
STOPPED = re.compile(r"relay stopped: id=\S+ passes=\d+ published=(\d+) deduped=(\d+) lost=(\d+)")


def roll_back() -> None:
    """Roll back the enclosing psycopg transaction block, which swallows the `Rollback`.

    A call, not an inline `raise`: mypy reads the `@contextmanager` block as never swallowing an
    exception and would take the rest of the test for unreachable.
    """
    raise psycopg.Rollback()


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls"
    path.touch()
    monkeypatch.setenv("XJOBS_E2E_CALLS", str(path))
    return path


@pytest.fixture
def outbox_app() -> Iterator[object]:
    sys.path.insert(0, str(HERE))
    import outbox_app

    yield outbox_app
    sys.path.remove(str(HERE))


def schema_of(url: str) -> str:
    return url.split("xjobs_schema=")[1].split("&")[0]


def ran(calls: Path) -> Counter[str]:
    return Counter(calls.read_text().split())


async def orders_table(url: str) -> str:
    """The app's own business table, in the test's schema (the order and its receipt commit together)."""
    schema = quote_schema(schema_of(url))
    table = f"{schema}.orders"
    conn = await asyncpg.connect(asyncpg_dsn(url)[0])
    try:
        await conn.execute(f"create schema if not exists {schema}")
        await conn.execute(f"create table if not exists {table} (id text primary key)")
    finally:
        await conn.close()
    return table


def app_for(outbox_app: object, queue_url: str, outbox_url: str | None = None) -> xjobs.App:
    module: object = outbox_app
    return xjobs.App(queue_url, jobs=[module.send_receipt], outbox=outbox_url)  # type: ignore[attr-defined]


async def relay_and_work(app: xjobs.App) -> None:
    await app.run_relay(until_idle=True)
    await app.run_worker(until_idle=True)


@pytest.mark.asyncio
async def test_psycopg_sync_commit_runs_the_job_and_rollback_never_does(
    pg_url: str, calls: Path, outbox_app: object
) -> None:
    table = await orders_table(pg_url)
    order = outbox_app.Order  # type: ignore[attr-defined]
    async with app_for(outbox_app, pg_url) as app:
        handle = app.jobs["send_receipt"]
        with psycopg.connect(asyncpg_dsn(pg_url)[0]) as conn:
            with conn.transaction():
                conn.execute(f"insert into {table} (id) values (%s)", ("o-1",))
                staged = handle.stage(conn, order(order_id="o-1"))
            with conn.transaction():
                conn.execute(f"insert into {table} (id) values (%s)", ("o-2",))
                handle.stage(conn, order(order_id="o-2"))
                roll_back()  # the handler failed after staging
        await relay_and_work(app)
        assert ran(calls) == Counter({"o-1": 1})
        assert (await app.get_job(staged.job_id)).run_id == staged.run_id
        assert await app.outbox_backend.outbox.pending() == 0  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_psycopg_async_commit_runs_the_job_and_rollback_never_does(
    pg_url: str, calls: Path, outbox_app: object
) -> None:
    table = await orders_table(pg_url)
    order = outbox_app.Order  # type: ignore[attr-defined]
    async with app_for(outbox_app, pg_url) as app:
        handle = app.jobs["send_receipt"]
        async with await psycopg.AsyncConnection.connect(asyncpg_dsn(pg_url)[0]) as conn:
            async with conn.transaction():
                await conn.execute(f"insert into {table} (id) values (%s)", ("o-1",))
                staged = await handle.stage_many(
                    conn, [order(order_id="o-1"), order(order_id="o-3")]
                )
            async with conn.transaction():
                await handle.stage(conn, order(order_id="o-2"))
                roll_back()
        await relay_and_work(app)
        assert ran(calls) == Counter({"o-1": 1, "o-3": 1})
        assert [(await app.get_job(s.job_id)).state for s in staged] == ["completed", "completed"]


@pytest.mark.asyncio
async def test_asyncpg_commit_runs_the_job_and_rollback_never_does(
    pg_url: str, calls: Path, outbox_app: object
) -> None:
    table = await orders_table(pg_url)
    order = outbox_app.Order  # type: ignore[attr-defined]
    async with app_for(outbox_app, pg_url) as app:
        handle = app.jobs["send_receipt"]
        conn = await asyncpg.connect(asyncpg_dsn(pg_url)[0])
        try:
            async with conn.transaction():
                await conn.execute(f"insert into {table} (id) values ($1)", "o-1")
                await handle.stage(conn, order(order_id="o-1"))
            rolled_back = conn.transaction()
            await rolled_back.start()
            await handle.stage(conn, order(order_id="o-2"))
            await rolled_back.rollback()
        finally:
            await conn.close()
        await relay_and_work(app)
        await relay_and_work(app)  # ever: a second round finds nothing either
        assert ran(calls) == Counter({"o-1": 1})


@pytest.mark.asyncio
async def test_a_postgres_outbox_feeds_a_redis_queue(
    pg_url: str, redis_queue_url: str, calls: Path, outbox_app: object
) -> None:
    order = outbox_app.Order  # type: ignore[attr-defined]
    async with app_for(outbox_app, redis_queue_url, pg_url) as app:
        assert (app.backend.name, app.outbox_backend.name) == ("redis", "postgres")
        conn = await asyncpg.connect(asyncpg_dsn(pg_url)[0])
        try:
            async with conn.transaction():
                staged = await app.jobs["send_receipt"].stage(conn, order(order_id="o-1"))
        finally:
            await conn.close()
        await relay_and_work(app)
        assert ran(calls) == Counter({"o-1": 1})
        assert (await app.get_job(staged.job_id)).state == "completed"


def relay_process(pg_url: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "xjobs_cli", "relay", "outbox_app:app", "--lease", "1", *extra]
    return subprocess.Popen(
        command,
        cwd=HERE,
        env={**os.environ, "XJOBS_E2E_URL": pg_url, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def started(process: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """`process` once its relay logged `jobs.relay.started`: its signal handlers are in place."""
    assert process.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(WAIT_S):
            while "jobs.relay.started" not in (
                line := await asyncio.to_thread(process.stderr.readline)
            ):
                assert line, (
                    f"the relay exited {process.wait()} before it started:\n{''.join(seen)}"
                )
                seen.append(line)
    except TimeoutError:
        process.kill()
        pytest.fail(f"the relay did not start within {WAIT_S}s:\n{''.join(seen)}")
    return process


def stop(process: subprocess.Popen[str]) -> tuple[int, int, int]:
    """SIGTERM the relay; answers (published, deduped, lost) from its stats line."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, err
    found = STOPPED.search(err)
    assert found, err
    published, deduped, lost = (int(n) for n in found.groups())
    return published, deduped, lost


async def eventually(predicate: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await predicate():  # type: ignore[operator]
        assert loop.time() < deadline, f"{what} did not happen within {WAIT_S}s"
        await asyncio.sleep(POLL_S)


@pytest.mark.asyncio
async def test_a_relay_killed_between_publish_and_mark_runs_the_job_once(
    pg_url: str, calls: Path, tmp_path: Path, outbox_app: object
) -> None:
    order = outbox_app.Order  # type: ignore[attr-defined]
    async with app_for(outbox_app, pg_url) as app:
        outbox = app.outbox_backend.outbox
        assert outbox is not None
        staged = await app.jobs["send_receipt"].stage(
            conn := await asyncpg.connect(asyncpg_dsn(pg_url)[0]), order(order_id="o-1")
        )
        await conn.close()
        marker = tmp_path / "published"
        first = await started(relay_process(pg_url, {"XJOBS_E2E_CRASH_AFTER_PUBLISH": str(marker)}))

        async def published() -> bool:
            return marker.exists()

        await eventually(published, "the first relay's publish")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=WAIT_S)
        assert (await app.get_job(staged.job_id)).state == "ready"  # published ...
        assert await outbox.pending() == 1  # ... but never marked
        second = await started(relay_process(pg_url, {}))

        async def drained() -> bool:
            return await outbox.pending() == 0

        await eventually(drained, "the second relay's republish")
        assert stop(second) == (0, 1, 0)  # the repeated id was deduped
        await app.run_worker(until_idle=True)
        assert ran(calls) == Counter({"o-1": 1})


@pytest.mark.asyncio
async def test_two_relays_at_once_publish_each_row_once(
    pg_url: str, calls: Path, outbox_app: object
) -> None:
    order = outbox_app.Order  # type: ignore[attr-defined]
    rows = 300
    async with app_for(outbox_app, pg_url) as app:
        outbox = app.outbox_backend.outbox
        assert outbox is not None
        relays = [relay_process(pg_url, {}, "--batch", "10") for _ in range(2)]
        for relay in relays:  # both running before the first row is staged
            await started(relay)
        conn = await asyncpg.connect(asyncpg_dsn(pg_url)[0])
        try:
            for start in range(0, rows, 30):  # staged while both relays run
                async with conn.transaction():
                    await app.jobs["send_receipt"].stage_many(
                        conn, [order(order_id=f"o-{n}") for n in range(start, start + 30)]
                    )
        finally:
            await conn.close()

        async def drained() -> bool:
            return await outbox.pending() == 0

        await eventually(drained, "both relays draining the outbox")
        counts = [stop(relay) for relay in relays]
        assert sum(published for published, _, _ in counts) == rows
        assert all(deduped == 0 and lost == 0 for _, deduped, lost in counts)
        await app.run_worker(until_idle=True)
        assert ran(calls) == Counter({f"o-{n}": 1 for n in range(rows)})
