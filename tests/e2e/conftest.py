"""The e2e tests' backends by URL: `memory://`, or a fresh Postgres schema or Redis key prefix on a test server.

`backend_url` runs a test on every backend, `durable_url` on the ones that outlive a process.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
import pytest_asyncio

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.client import connect
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix


def with_option(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


@asynccontextmanager
async def fresh_backend_url(engine: str) -> AsyncIterator[str]:
    """A URL for `engine` whose `?xjobs_schema=` / `?xjobs_prefix=` is new, dropped on exit
    (after checking the app really kept its data there)."""
    if engine == "memory":
        yield "memory://"
    elif engine == "redis":
        try:
            server = redis_url()
        except RedisUnavailable as exc:
            unavailable(f"no Redis server for the e2e test: {exc}")
        prefix = f"xjobs_t_{secrets.token_hex(6)}"
        yield with_option(server, f"xjobs_prefix={prefix}")
        client = connect(server, decode_responses=True)  # a Cluster's client for its URL
        try:
            used = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            assert used, f"the app kept no key under the URL's xjobs_prefix={prefix}"
            await drop_prefix(client, prefix)
        finally:
            await client.aclose()
    else:
        try:
            server = postgres_url()
        except ServerUnavailable as exc:
            unavailable(f"no Postgres server for the e2e test: {exc}")
        schema = f"xjobs_t_{secrets.token_hex(6)}"
        yield with_option(server, f"xjobs_schema={schema}")
        conn = await asyncpg.connect(asyncpg_dsn(server)[0])
        try:
            await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
        finally:
            await conn.close()


@pytest_asyncio.fixture(params=["memory", "postgres", "redis"])
async def backend_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """`memory://`, or a fresh schema / key prefix on a test server (dropped after)."""
    async with fresh_backend_url(request.param) as url:
        yield url


@pytest_asyncio.fixture(params=["postgres", "redis"])
async def durable_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh schema / key prefix on the Postgres or the Redis test server (dropped after)."""
    async with fresh_backend_url(request.param) as url:
        yield url


@pytest_asyncio.fixture
async def pg_url() -> AsyncIterator[str]:
    """A fresh schema on the Postgres test server (dropped after)."""
    async with fresh_backend_url("postgres") as url:
        yield url


@pytest_asyncio.fixture
async def redis_queue_url() -> AsyncIterator[str]:
    """A fresh key prefix on the Redis test server (dropped after)."""
    async with fresh_backend_url("redis") as url:
        yield url
