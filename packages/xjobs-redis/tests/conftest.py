"""Fixtures for the Redis package's own tests: the real test server, a throwaway key prefix, backends over it."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from xjobs.clock import ManualClock, SystemClock
from xjobs.contract.backend import Backend
from xjobs_redis.backend import open_backend
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


@pytest.fixture
def clock() -> ManualClock:
    """The manual clock `manual_backend` runs on."""
    return ManualClock()


@pytest_asyncio.fixture
async def manual_backend(
    url: str, prefix: str, client: Redis, clock: ManualClock
) -> AsyncIterator[Backend]:
    """A backend on the manual `clock`, under this test's prefix (dropped by `client`)."""
    backend = await open_backend(url, clock=clock, prefix=prefix)
    try:
        yield backend
    finally:
        await backend.close()


@pytest_asyncio.fixture
async def server_backend(url: str, prefix: str, client: Redis) -> AsyncIterator[Backend]:
    """A backend on the wall clock, so every script reads the server's TIME."""
    backend = await open_backend(url, clock=SystemClock(), prefix=prefix)
    try:
        yield backend
    finally:
        await backend.close()
