"""The dashboard served alone with uvicorn: the App opened for the server's lifetime, the pages at
`/` or under a path (`xjobs web --path /_x`, its root then redirects there); on loopback it may
be read-only without auth, and it answers loopback names on its port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Mount, Route

from xjobs import App
from xjobs_web.asgi import build
from xjobs_web.hosts import is_loopback
from xjobs_web.mount import mount_path
from xjobs_web.options import Binding


def standalone(app: App, binding: Binding, options: dict[str, Any], path: str = "/") -> Starlette:
    """The dashboard served at `binding` under `path`, with a lifespan that opens `app` on start
    and closes it on stop."""
    path = mount_path(path)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with app:
            yield

    async def home(_: Request) -> RedirectResponse:
        return RedirectResponse(f"{path}/", status_code=307)

    routes: list[BaseRoute] = [Mount(path, build(app, options, binding))]
    if path != "/":  # the bare root and the mount without its slash lead to the dashboard
        routes[:0] = [Route(p, home) for p in ("/", path)]
    return Starlette(routes=routes, lifespan=lifespan)


class _Server(uvicorn.Server):
    """uvicorn's server, but SIGTERM / SIGINT end the process with 0 after the graceful shutdown,
    as `xjobs worker` does (uvicorn would re-raise the signal and end the process by it)."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


def server(
    app: App,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_level: str = "warning",
    path: str = "/",
    **options: Any,
) -> uvicorn.Server:
    """A uvicorn server of the standalone dashboard under `path`, not yet started (`.run()`
    serves until SIGTERM)."""
    binding = Binding(host, port, is_loopback(host))
    config = uvicorn.Config(
        standalone(app, binding, options, path),
        host=host,
        port=port,
        log_level=log_level.lower(),
        lifespan="on",
        access_log=log_level.lower() in ("debug", "info"),
    )
    return _Server(config)
