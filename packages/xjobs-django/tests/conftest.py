"""The Django project under `djproject/` set up in this process (its SQLite file in a temporary
directory the worker processes share), and a fresh xjobs backend URL per test."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from xjobs_pg.backend import asyncpg_dsn
from xjobs_pg.schema import quote_schema
from xjobs_pg.servers import ServerUnavailable, postgres_url, unavailable
from xjobs_redis.servers import ServerUnavailable as RedisUnavailable
from xjobs_redis.servers import redis_url
from xjobs_redis.testing import drop_prefix

PROJECT = Path(__file__).resolve().parent / "djproject"
DATA = Path(tempfile.mkdtemp(prefix="xjobs-django-"))

os.environ["DJANGO_SETTINGS_MODULE"] = "djproject.settings"
os.environ["SHOP_DB"] = str(DATA / "shop.sqlite3")
# the project's modules (`shop`, `djproject`) and this folder's helper (`django_worker`)
sys.path[:0] = [str(PROJECT), str(PROJECT.parent)]

import django  # noqa: E402 - after the settings module is named
from django.core.management import call_command  # noqa: E402

django.setup()
call_command("migrate", verbosity=0)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(DATA, ignore_errors=True)


def _with(url: str, option: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{option}"


async def _drop_schema(server: str, schema: str) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(server)[0])
    try:
        await conn.execute(f"drop schema if exists {quote_schema(schema)} cascade")
    finally:
        await conn.close()


async def _drop_prefix(server: str, prefix: str) -> None:
    client = Redis.from_url(server, decode_responses=True)
    try:
        await drop_prefix(client, prefix)
    finally:
        await client.aclose()


def fresh_url(engine: str) -> Iterator[str]:
    """A URL whose Postgres schema or Redis key prefix is new, dropped after."""
    name = f"xjobs_t_{secrets.token_hex(6)}"
    if engine == "postgres":
        try:
            server = postgres_url()
        except ServerUnavailable as exc:
            unavailable(f"no Postgres server for the Django tests: {exc}")
        yield _with(server, f"xjobs_schema={name}")
        asyncio.run(_drop_schema(server, name))
    else:
        try:
            server = redis_url()
        except RedisUnavailable as exc:
            unavailable(f"no Redis server for the Django tests: {exc}")
        yield _with(server, f"xjobs_prefix={name}")
        asyncio.run(_drop_prefix(server, name))


@pytest.fixture(params=["postgres", "redis"])
def xjobs_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh schema (Postgres) or key prefix (Redis) on a test server, and the project's
    `TASKS` pointed at it (the worker processes get it as `SHOP_XJOBS_URL`)."""
    from django.test import override_settings

    from xjobs_django.portal import close_portal

    for url in fresh_url(str(request.param)):
        tasks = {
            "default": {
                "BACKEND": "xjobs_django.XJobsBackend",
                "QUEUES": ["default", "emails"],
                "OPTIONS": {"url": url},
            }
        }
        with override_settings(TASKS=tasks):
            try:
                yield url
            finally:
                close_portal()
