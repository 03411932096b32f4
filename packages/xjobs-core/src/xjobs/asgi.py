"""ASGI glue: an `App` opened and closed with the web service (plain ASGI lifespan, no framework),
with an optional worker in the same process for small deployments."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Unpack

from xjobs.app import App
from xjobs.roles.worker import Worker
from xjobs.roles.worker_options import WorkerKwargs

log = logging.getLogger("xjobs.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Service:
    """The xjobs side of one service's life: open the `App` (and start the in-process worker),
    then drain the worker and close the `App`."""

    def __init__(
        self,
        app: App,
        *,
        worker: bool,
        queues: Sequence[str] | None,
        worker_options: WorkerKwargs,
    ) -> None:
        self.app = app
        self._run_worker = worker
        self._queues = queues
        self._worker_options = worker_options
        self.worker: Worker | None = None

    async def start(self) -> None:
        """Open the app; with a worker, start it (it drains when the service stops)."""
        await self.app.open()
        if not self._run_worker:
            return
        try:
            self.worker = self.app.worker(queues=self._queues, **self._worker_options)
            await self.worker.start()
        except BaseException:
            self.worker = None
            await self.app.close()
            raise

    async def stop(self) -> None:
        """Drain the worker (no new claims; what runs finishes within its drain timeout), then
        close the app."""
        worker, self.worker = self.worker, None
        try:
            if worker is not None:
                worker.stop_accepting(drain_timeout_ms=worker.options.drain_timeout_ms)
                await worker.close()
        finally:
            await self.app.close()


def lifespan(
    app: App,
    *,
    worker: bool = False,
    queues: Sequence[str] | None = None,
    **worker_options: Unpack[WorkerKwargs],
) -> Callable[[object], contextlib.AbstractAsyncContextManager[None]]:
    """A lifespan for `FastAPI(lifespan=...)` or `Starlette(lifespan=...)`: the `App` is open
    while the service runs; `worker=True` also runs a worker over `queues` in this process."""
    service = Service(app, worker=worker, queues=queues, worker_options=worker_options)

    @contextlib.asynccontextmanager
    async def run(_: object) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    return run


class XJobsLifespan:
    """ASGI middleware that opens the `App` at the server's lifespan startup and closes it at
    shutdown, around the wrapped application's own lifespan (or in its place, when the wrapped
    application does not speak lifespan, as Django's ASGI handler does not)."""

    def __init__(
        self,
        asgi_app: ASGIApp,
        app: App,
        *,
        worker: bool = False,
        queues: Sequence[str] | None = None,
        **worker_options: Unpack[WorkerKwargs],
    ) -> None:
        self._asgi_app = asgi_app
        self._service = Service(app, worker=worker, queues=queues, worker_options=worker_options)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection: a lifespan here, anything else by the wrapped application."""
        if scope["type"] != "lifespan":
            await self._asgi_app(scope, receive, send)
            return
        await self._lifespan(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        service = self._service
        phase = {"inner_started": False, "started": False, "done": False}

        async def receive_through() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await service.start()
                phase["started"] = True
            return message

        async def send_through(message: Message) -> None:
            kind = message["type"]
            if kind == "lifespan.startup.complete":
                phase["inner_started"] = True
            elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await service.stop()
                phase["done"] = True
            elif kind == "lifespan.startup.failed" and phase["started"]:
                await service.stop()
            await send(message)

        try:
            await self._asgi_app(scope, receive_through, send_through)
        except Exception:
            if phase["inner_started"]:
                raise
            # The wrapped application refused the lifespan scope: serve it here.
            log.debug("xjobs.asgi: the wrapped application has no lifespan; xjobs serves it")
            await self._own_lifespan(receive, send, started=phase["started"])

    async def _own_lifespan(self, receive: Receive, send: Send, *, started: bool) -> None:
        service = self._service
        if not started:
            message = await receive()
            if message["type"] != "lifespan.startup":
                return
            try:
                await service.start()
            except Exception as exc:
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
        await send({"type": "lifespan.startup.complete"})
        message = await receive()
        if message["type"] == "lifespan.shutdown":
            await service.stop()
            await send({"type": "lifespan.shutdown.complete"})
