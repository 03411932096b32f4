"""Fixtures for the CLI tests: a scratch working directory; sys.path and sys.modules restored; and
`ops`, an operator-command harness over a fresh memory, Postgres or Redis store."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

import xjobs
from xjobs_cli.load import load_app
from xjobs_cli.main import main

T = TypeVar("T")
OPS_APP = Path(__file__).with_name("ops_app.py")
APP_SPEC = "opsapp:app"
BACKENDS = ["memory", "postgres", "redis"]


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory for MODULE:APP files; its imported modules are forgotten after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        if module is not None and str(getattr(module, "__file__", "") or "").startswith(
            str(tmp_path)
        ):
            del sys.modules[name]


@dataclass
class Result:
    """One `xjobs` run: its exit code and what it printed."""

    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        """stdout as the one JSON document it must be."""
        return json.loads(self.out)

    @property
    def error(self) -> Any:
        """The JSON error object stderr must end with."""
        return json.loads(self.err.strip().splitlines()[-1])["error"]


@dataclass
class Ops:
    """A store of one backend kind, the `opsapp:app` over it, and `xjobs` run against them."""

    kind: str
    url: str
    module: ModuleType
    capsys: pytest.CaptureFixture[str]

    @property
    def app(self) -> xjobs.App:
        app: xjobs.App = self.module.app
        return app

    def cli(self, command: str, *rest: str, url: bool = False, json: bool = True) -> Result:
        """`xjobs <command> <target> <rest…> [--json]`; the target is `opsapp:app` or `--url`."""
        target = ["--url", self.url] if url else [APP_SPEC]
        argv = [*command.split(), *target, *rest, *(["--json"] if json else [])]
        self.capsys.readouterr()
        code = main(argv)
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def run(self, work: Callable[[xjobs.App], Awaitable[T]]) -> T:
        """`work(app)` with the app open, in an event loop of its own."""

        async def opened() -> T:
            async with self.app as app:
                return await work(app)

        return asyncio.run(opened())

    def enqueue(self, handle: str, *order_ids: str, **options: Any) -> list[str]:
        """Enqueue one job of `handle` per order id; their job ids."""
        job = getattr(self.module, handle)
        orders = [self.module.Order(order_id=o) for o in order_ids]

        async def go(app: xjobs.App) -> list[str]:
            return [r.job_id for r in await job.enqueue_many(orders, **options)]

        return self.run(go)

    def tick(self) -> None:
        """Let the clock move past this millisecond (jobs of one ms are ordered by their random id)."""
        time.sleep(0.005)

    def work(self) -> xjobs.WorkerStats:
        """Run a worker over the app's queues until nothing is claimable."""
        return self.run(lambda app: app.run_worker(until_idle=True, concurrency=50))

    def dead(self, *order_ids: str) -> list[str]:
        """Charges that fail once and end dead (one attempt each); their job ids."""
        self.module.FAILING.update(order_ids)
        ids = self.enqueue("charge", *order_ids)
        self.work()
        self.module.FAILING.difference_update(order_ids)
        return ids


def _memory_url() -> Iterator[str]:
    name = f"cli-{secrets.token_hex(6)}"
    yield f"memory://{name}"
    from xjobs.memory import plugin

    plugin._named.pop(name, None)  # the named store would live as long as the test process


def _postgres_url() -> Iterator[str]:
    from xjobs_pg.schema import quote_schema
    from xjobs_pg.testing import DROP_SCHEMA, server_url, session

    schema = f"xjobs_t_{secrets.token_hex(6)}"
    base = server_url()
    yield f"{base}{'&' if '?' in base else '?'}xjobs_schema={schema}"

    async def drop() -> None:
        async with session() as conn:
            await conn.execute(DROP_SCHEMA.format(schema=quote_schema(schema)))

    asyncio.run(drop())


def _redis_url() -> Iterator[str]:
    from redis.asyncio import Redis

    from xjobs_redis.testing import drop_prefix, server_url

    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    base = server_url()
    yield f"{base}{'&' if '?' in base else '?'}xjobs_prefix={prefix}"

    async def drop() -> None:
        client = Redis.from_url(base, decode_responses=True)
        try:
            await drop_prefix(client, prefix)
        finally:
            await client.aclose()

    asyncio.run(drop())


_URLS: dict[str, Callable[[], Iterator[str]]] = {
    "memory": _memory_url,
    "postgres": _postgres_url,
    "redis": _redis_url,
}


def _ops(
    kind: str,
    app_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Ops]:
    urls = _URLS[kind]()
    url = next(urls)
    monkeypatch.setenv("XJOBS_CLI_TEST_URL", url)
    (app_dir / "opsapp.py").write_text(OPS_APP.read_text())
    load_app(APP_SPEC)
    yield Ops(kind, url, sys.modules["opsapp"], capsys)
    next(urls, None)


@pytest.fixture(params=BACKENDS)
def ops(
    request: pytest.FixtureRequest,
    app_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Ops]:
    """The operator harness on each backend: memory, Postgres, Redis."""
    yield from _ops(request.param, app_dir, monkeypatch, capsys)


@pytest.fixture
def memory_ops(
    app_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Ops]:
    """The operator harness on the memory backend only (for what does not vary by backend)."""
    yield from _ops("memory", app_dir, monkeypatch, capsys)


@pytest.fixture
def fresh_url() -> Iterator[Callable[[str], str]]:
    """`fresh_url(kind)`: the URL of a new empty store of `kind` (memory, postgres, redis), dropped
    after the test."""
    opened: list[Iterator[str]] = []

    def make(kind: str) -> str:
        urls = _URLS[kind]()
        opened.append(urls)
        return next(urls)

    yield make
    for urls in opened:
        next(urls, None)
