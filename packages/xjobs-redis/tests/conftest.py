"""Fixtures for the Redis package's own tests: the real test server, and a throwaway key prefix."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from xjobs_redis.servers import ServerUnavailable, redis_url, unavailable
from xjobs_redis.testing import drop_prefix


@pytest.fixture
def url() -> str:
    """The test server's URL (a skip, or a failure under XJOBS_REQUIRE_SERVERS=1, without one)."""
    try:
        return redis_url()
    except ServerUnavailable as exc:
        unavailable(str(exc))


@pytest.fixture
def prefix() -> str:
    """A key prefix of this test's own, shaped like the parity suite's."""
    return f"xjobs_t_{secrets.token_hex(6)}"


@pytest_asyncio.fixture
async def client(url: str, prefix: str) -> AsyncIterator[Redis]:
    """A plain client; every key under `prefix` is dropped afterwards."""
    conn = Redis.from_url(url, decode_responses=True)
    try:
        yield conn
    finally:
        await drop_prefix(conn, prefix)
        await conn.aclose()
