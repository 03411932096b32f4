"""Fixtures for the dashboard tests: a fresh store per backend, the test app (`webapp.py`) served by
uvicorn on a free port in a thread with its own event loop, and headless Debian Chromium."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import secrets
import shutil
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

import xjobs
from xjobs_web import dashboard
from xjobs_web.serve import server

T = TypeVar("T")
HERE = Path(__file__).parent
WEBAPP = HERE / "webapp.py"
URL_ENV = "XJOBS_WEB_TEST_URL"


def require(what: str) -> None:
    """Skip for want of `what`, or fail under XJOBS_REQUIRE_SERVERS=1 (CI)."""
    if os.environ.get("XJOBS_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{what} is required (XJOBS_REQUIRE_SERVERS=1)")
    pytest.skip(f"no {what}")


def run_aside(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """`asyncio.run(work())` on a thread of its own (the Playwright sync API owns this thread's loop)."""
    failed: list[BaseException] = []

    def body() -> None:
        try:
            asyncio.run(work())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    """A fresh store of `kind`: a named memory store, a Postgres schema or a Redis key prefix."""
    if kind == "memory":
        name = f"web-{secrets.token_hex(6)}"
        yield f"memory://{name}"
        from xjobs.memory import plugin

        plugin._named.pop(name, None)
        return
    if kind == "postgres":
        from xjobs_pg.schema import quote_schema
        from xjobs_pg.testing import DROP_SCHEMA, server_url, session

        schema = f"xjobs_t_{secrets.token_hex(6)}"
        base = server_url()
        yield f"{base}{'&' if '?' in base else '?'}xjobs_schema={schema}"

        async def drop_schema() -> None:
            async with session() as conn:
                await conn.execute(DROP_SCHEMA.format(schema=quote_schema(schema)))

        run_aside(drop_schema)
        return
    from redis.asyncio import Redis

    from xjobs_redis.testing import drop_prefix
    from xjobs_redis.testing import server_url as redis_server

    prefix = f"xjobs_t_{secrets.token_hex(6)}"
    base = redis_server()
    yield f"{base}{'&' if '?' in base else '?'}xjobs_prefix={prefix}"

    async def drop_keys() -> None:
        client = Redis.from_url(base, decode_responses=True)
        try:
            await drop_prefix(client, prefix)
        finally:
            await client.aclose()

    run_aside(drop_keys)


def load_webapp(url: str) -> ModuleType:
    """A fresh `webapp` module (its App over `url`, its own job handles)."""
    os.environ[URL_ENV] = url
    spec = importlib.util.spec_from_file_location("webapp", WEBAPP)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["webapp"] = module
    spec.loader.exec_module(module)
    return module


def host_app(app: xjobs.App, mount: str, **options: Any) -> Starlette:
    """A service's own Starlette app: its lifespan opens `app`, the dashboard is mounted at `mount`."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with app:
            yield

    async def home(request: StarletteRequest) -> PlainTextResponse:
        return PlainTextResponse("the service's own page")

    routes = [Route("/", home), Mount(mount, dashboard(app, **options))]
    return Starlette(routes=routes, lifespan=lifespan)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Served:
    """The test app's dashboard served by uvicorn in a thread; `call` runs a coroutine on the
    server's own loop (with the server's open App), so tests seed and check through one App."""

    def __init__(self, kind: str, url: str, mount: str | None = None, **options: Any) -> None:
        self.kind = kind
        self.module = load_webapp(url)
        self.app: xjobs.App = self.module.app
        self.port = free_port()
        if mount is None:
            self.server: uvicorn.Server = server(self.app, port=self.port, **options)
        else:  # mounted under a path of the service's own Starlette app, as a service does
            self.server = uvicorn.Server(
                uvicorn.Config(
                    host_app(self.app, mount, **options), port=self.port, log_level="warning"
                )
            )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        ready = threading.Event()
        while not self.server.started and self.thread.is_alive():
            ready.wait(0.02)
        assert self.server.started, "the dashboard did not start"

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve())

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def call(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def as_org(self, org: str | None, work: Coroutine[Any, Any, T]) -> T:
        """`work` with `org` as the enqueuing actor (the tenant its jobs are stored under)."""

        async def acting() -> T:
            return await xjobs.run_with_context(xjobs.Actor(org_id=org), lambda: work)

        return self.call(acting())

    def work(self) -> None:
        """Run a worker over the app's queues until nothing is claimable."""
        self.call(self.app.run_worker(until_idle=True, handle_signals=False, concurrency=20))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.loop.close()


@contextmanager
def served(kind: str, mount: str | None = None, **options: Any) -> Iterator[Served]:
    with store_url(kind) as url:
        instance = Served(kind, url, mount, **options)
        try:
            yield instance
        finally:
            instance.stop()


@pytest.fixture(scope="module")
def memory_served() -> Iterator[Served]:
    """A dashboard over the memory backend with every action allowed to anyone (the explicit
    opt-out: these tests are about what an action does, not who may take it)."""
    with served("memory", unsafe_no_auth=True) as s:
        yield s


@pytest.fixture(scope="session")
def chromium_path() -> str:
    found = os.environ.get("XJOBS_CHROMIUM") or shutil.which("chromium")
    if not found:
        require("Chromium (Debian's `chromium` package)")
    assert found is not None
    return found


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where a test saves its screenshots (the README's are kept by $XJOBS_WEB_SCREENSHOTS)."""
    return tmp_path


class Http:
    """A plain HTTP client with a cookie jar that does not follow redirects (it reports them)."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        import http.cookiejar
        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        self.base = base
        self.headers = headers or {}
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), NoRedirect()
        )

    def request(
        self, method: str, path: str, form: list[tuple[str, str]] | None = None
    ) -> tuple[int, dict[str, str], str]:
        import urllib.error
        import urllib.parse
        import urllib.request

        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        for key, value in self.headers.items():
            req.add_header(key, value)
        if data is not None:
            req.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode()

    def get(self, path: str) -> tuple[int, str]:
        status, _, body = self.request("GET", path)
        return status, body

    def post(self, path: str, form: list[tuple[str, str]]) -> tuple[int, dict[str, str], str]:
        return self.request("POST", path, form)


def csrf_token(page: str) -> str:
    """The CSRF token a rendered page's forms carry."""
    import re

    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, "the page renders no action form"
    return found.group(1)


Serve = Callable[..., AbstractContextManager[Served]]


@pytest.fixture(scope="session")
def serve() -> Serve:
    """`serve(kind, **options)`: a context manager of a dashboard with those options."""
    return served


@pytest.fixture(scope="session")
def client() -> type[Http]:
    """The HTTP client class (`client(base, headers)`)."""
    return Http


@pytest.fixture(scope="session")
def token_of() -> Callable[[str], str]:
    """`token_of(page)`: the CSRF token a rendered page's forms carry."""
    return csrf_token


@dataclass(frozen=True)
class Seeded:
    """A fresh store holding one dead export (why last night's export failed) and a completed mail."""

    kind: str
    url: str
    dead_id: str


async def _seed_failure(url: str) -> str:
    m = load_webapp(url)
    m.FAILING.add("nightly-export")
    async with m.app as app:
        export = m.Export(org="acme", report="nightly-export")
        result = await xjobs.run_with_context(
            xjobs.Actor(org_id="acme"), lambda: m.export.enqueue(export)
        )
        await m.send_mail.enqueue(m.Mail(to="ops@example.com"))
        await app.run_worker(until_idle=True, handle_signals=False)
    m.FAILING.clear()
    return str(result.job_id)


@pytest.fixture(params=["postgres", "redis"])
def seeded(request: pytest.FixtureRequest) -> Iterator[Seeded]:
    """A fresh Postgres schema or Redis prefix with a dead export in it."""
    with store_url(request.param) as url:
        found: list[str] = []

        async def seed() -> None:
            found.append(await _seed_failure(url))

        run_aside(seed)
        yield Seeded(request.param, url, found[0])
