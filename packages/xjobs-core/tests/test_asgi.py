"""`xjobs.asgi`: the App opened and closed with the service's ASGI lifespan, around an application
that speaks lifespan or in place of one that does not, and the in-process worker."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest
from pydantic import BaseModel

import xjobs
from xjobs.asgi import XJobsLifespan, lifespan
from xjobs.errors import BackendClosedError

Message = MutableMapping[str, Any]


class Ping(BaseModel):
    n: int


@xjobs.job(tenant="none", idempotency_key=lambda p: str(p.n), queue="asgi")
async def ping(ctx: xjobs.JobContext, p: Ping) -> int:
    return p.n * 2


class Server:
    """The lifespan half of an ASGI server: sends startup, then shutdown, records the answers."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.sent: list[str] = []
        self.answered = asyncio.Event()

    async def receive(self) -> Message:
        return await self.inbox.get()

    async def send(self, message: Message) -> None:
        self.sent.append(message["type"])
        self.answered.set()

    async def step(self, kind: str) -> None:
        self.answered.clear()
        await self.inbox.put({"type": kind})
        await asyncio.wait_for(self.answered.wait(), 10)


async def no_lifespan(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """An application that serves only HTTP, as Django's ASGI handler does."""
    if scope["type"] != "http":
        raise ValueError(f"cannot handle {scope['type']}")
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


class WithLifespan:
    """An application with a lifespan of its own, which records its phases."""

    def __init__(self) -> None:
        self.phases: list[str] = []

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.phases.append("started")
                await send({"type": "lifespan.startup.complete"})
            else:
                self.phases.append("stopped")
                await send({"type": "lifespan.shutdown.complete"})
                return


async def run_lifespan(asgi: XJobsLifespan, app: xjobs.App, server: Server) -> None:
    task = asyncio.create_task(asgi({"type": "lifespan"}, server.receive, server.send))
    await server.step("lifespan.startup")
    assert server.sent == ["lifespan.startup.complete"]
    assert (await ping.enqueue(Ping(n=21))).job_id  # the app is open: its handles enqueue
    await server.step("lifespan.shutdown")
    await asyncio.wait_for(task, 10)
    assert server.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    with pytest.raises(BackendClosedError):
        app.backend  # noqa: B018 - closed with the service


@pytest.mark.asyncio
async def test_the_middleware_serves_the_lifespan_of_an_application_without_one() -> None:
    app = xjobs.App("memory://", jobs=[ping])
    await run_lifespan(XJobsLifespan(no_lifespan, app), app, Server())


@pytest.mark.asyncio
async def test_the_middleware_wraps_the_lifespan_of_an_application_with_one() -> None:
    app = xjobs.App("memory://", jobs=[ping])
    inner = WithLifespan()
    await run_lifespan(XJobsLifespan(inner, app), app, Server())
    assert inner.phases == ["started", "stopped"]


@pytest.mark.asyncio
async def test_other_scopes_pass_through_untouched() -> None:
    app = xjobs.App("memory://", jobs=[ping])
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    await XJobsLifespan(no_lifespan, app)({"type": "http"}, receive, send)
    assert sent[0] == {"type": "http.response.start", "status": 204, "headers": []}


@pytest.mark.asyncio
async def test_the_in_process_worker_runs_jobs_while_the_service_is_up() -> None:
    app = xjobs.App("memory://", jobs=[ping])
    async with lifespan(app, worker=True, concurrency=2)(object()):
        enqueued = await ping.enqueue(Ping(n=4))
        assert await enqueued.result() == 8
    with pytest.raises(BackendClosedError):
        app.backend  # noqa: B018 - closed with the service


@pytest.mark.asyncio
async def test_a_startup_that_fails_is_reported_to_the_server() -> None:
    app = xjobs.App("nosuchscheme://", jobs=[ping])
    server = Server()
    task = asyncio.create_task(
        XJobsLifespan(no_lifespan, app)({"type": "lifespan"}, server.receive, server.send)
    )
    await server.step("lifespan.startup")
    await asyncio.wait_for(task, 10)
    assert server.sent == ["lifespan.startup.failed"]
