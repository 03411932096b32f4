"""The telemetry tests' backends: a fresh Postgres schema or Redis key prefix on a test server, dropped after."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from redis.asyncio import Redis

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix


def with_option(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


async def _postgres() -> AsyncIterator[str]:
    try:
        server = postgres_url()
    except ServerUnavailable as exc:
        unavailable(f"no Postgres server for the telemetry test: {exc}")
    schema = f"xjobs_obs_{secrets.token_hex(6)}"
    yield with_option(server, f"xjobs_schema={schema}")
    conn = await asyncpg.connect(asyncpg_dsn(server)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
    finally:
        await conn.close()


async def _redis() -> AsyncIterator[str]:
    try:
        server = redis_url()
    except RedisUnavailable as exc:
        unavailable(f"no Redis server for the telemetry test: {exc}")
    prefix = f"xjobs_obs_{secrets.token_hex(6)}"
    yield with_option(server, f"xjobs_prefix={prefix}")
    client = Redis.from_url(server, decode_responses=True)
    try:
        await drop_prefix(client, prefix)
    finally:
        await client.aclose()


@pytest_asyncio.fixture(params=["postgres", "redis"])
async def durable_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh schema / key prefix on the Postgres or the Redis test server (dropped after)."""
    source = _postgres() if request.param == "postgres" else _redis()
    async for url in source:
        yield url


@pytest_asyncio.fixture
async def redis_queue_url() -> AsyncIterator[str]:
    """A fresh key prefix on the Redis test server (dropped after)."""
    async for url in _redis():
        yield url
