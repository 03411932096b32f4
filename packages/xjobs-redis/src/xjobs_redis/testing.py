"""Fresh, isolated Redis backends for the parity suite: a key prefix per test on a shared server
(or on the shared Redis Cluster under `XJOBS_TEST_REDIS_CLUSTER=1`)."""

from __future__ import annotations

import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs_redis.backend import open_backend
from xjobs_redis.client import Client, connect
from xjobs_redis.servers import ServerUnavailable, redis_url, unavailable

TEST_PREFIX = re.compile(r"xjobs_t_[0-9a-f]{12}:")


def server_url() -> str:
    """The test server's URL, or a skip (a failure under `XJOBS_REQUIRE_SERVERS=1`)."""
    try:
        return redis_url()
    except ServerUnavailable as exc:
        unavailable(f"no Redis server for the parity suite: {exc}")


async def keys_outside_tests(client: Client) -> set[str]:
    """Every key that is not under some test's prefix (another test's keys are its own business)."""
    return {str(key) async for key in client.scan_iter(count=1000) if not TEST_PREFIX.match(key)}


async def drop_prefix(client: Client, prefix: str) -> None:
    """Remove every key under `prefix`."""
    batch: list[str] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(str(key))
        if len(batch) >= 500:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


@asynccontextmanager
async def test_backend(clock: Clock) -> AsyncIterator[Backend]:
    """A backend under a prefix of its own, dropped afterwards, with a check that nothing leaked."""
    url = server_url()
    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    admin = connect(url, decode_responses=True)
    try:
        before = await keys_outside_tests(admin)
        backend = await open_backend(url, clock=clock, prefix=prefix)
        try:
            yield backend
        finally:
            await backend.close()
            await drop_prefix(admin, prefix)
        leaks = sorted(await keys_outside_tests(admin) - before)
    finally:
        await admin.aclose()
    assert not leaks, f"a test left keys outside its prefix {prefix!r}: {leaks}"
