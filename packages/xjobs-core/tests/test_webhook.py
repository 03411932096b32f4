"""`webhook()` against a real local HTTP server (`http.server` on a thread): status codes, slow
answers, the signature the receiver verifies, refused redirects, the ledger and its gate, tenants.

The worker runs in-process on the memory backend with a manual clock, so a retry's due time is
read exactly; the HTTP exchange is real.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import pytest_asyncio

import xjobs
from xjobs.contract.webhooks import WebhookLedger
from xjobs.errors import DeclarationInvalidError, ExtraMissingError
from xjobs.factories import Endpoint, WebhookEvent, new_secret, verify, webhook
from xjobs.factories.webhook_errors import TenantMismatchError
from xjobs.factories.webhook_http import MAX_RETRY_AFTER_MS, httpx_module, retry_after_ms
from xjobs.factories.webhook_sign import WebhookSignatureError

SECRET = new_secret()


@dataclass
class Seen:
    """One request the receiver got: its path, its webhook-id, whether its signature verified."""

    path: str
    message_id: str
    verified: bool
    payload: Any


@dataclass
class Receiver:
    """A real HTTP server: each path answers from its script (status codes, in order, the last
    repeated), `/slow/<s>` after s seconds, `/redirect` with a 302 to `/ok`."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    scripts: dict[str, list[int]] = field(default_factory=dict)
    retry_after: dict[str, str] = field(default_factory=dict)

    def status_for(self, path: str) -> int:
        script = self.scripts.get(path, [200])
        return script.pop(0) if len(script) > 1 else script[0]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                payload, verified = verify(SECRET, dict(self.headers), body), True
            except WebhookSignatureError:
                payload, verified = None, False
            receiver.seen.append(Seen(self.path, self.headers["webhook-id"], verified, payload))
            if self.path.startswith("/slow/"):
                time.sleep(float(self.path.rsplit("/", 1)[1]))
            if self.path == "/redirect":
                self._answer(302, {"location": f"{receiver.url}/ok"})
                return
            extra = {}
            if self.path in receiver.retry_after:
                extra["retry-after"] = receiver.retry_after[self.path]
            self._answer(receiver.status_for(self.path), extra)

        def _answer(self, status: int, headers: dict[str, str]) -> None:
            text = f"answer {status}".encode()
            self.send_response(status)
            for name, value in {**headers, "content-length": str(len(text))}.items():
                self.send_header(name, value)
            self.end_headers()
            # the sender may have given up (its timeout) before the answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(text)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads `receiver.seen`."""

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(found))
    server.daemon_threads = True
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class World:
    """An app with one webhook job over `receiver`, on the memory backend and a manual clock."""

    app: xjobs.App
    handle: xjobs.JobHandle[WebhookEvent]
    clock: xjobs.ManualClock
    receiver: Receiver

    @property
    def ledger(self) -> WebhookLedger:
        found = self.app.backend.webhooks
        assert found is not None
        return found

    async def send(self, endpoint: str, **fields: Any) -> str:
        event = WebhookEvent(endpoint=endpoint, type="invoice.paid", data={"n": 1}, **fields)
        return (await self.handle.enqueue(event)).job_id

    async def run(self) -> None:
        await self.app.run_worker(until_idle=True)

    async def later(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.run()


def _endpoints(receiver: Receiver) -> dict[str, Endpoint]:
    paths = {
        "ok": "/ok",
        "flaky": "/flaky",
        "gone": "/gone",
        "slow": "/slow/2",
        "redirect": "/redirect",
        "busy": "/busy",
        "down": "/down",
    }
    found = {
        name: Endpoint(url=f"{receiver.url}{path}", secrets=(SECRET,), org_id="org-a")
        for name, path in paths.items()
    }
    found["other-org"] = Endpoint(url=f"{receiver.url}/ok", secrets=(SECRET,), org_id="org-b")
    return found


@pytest_asyncio.fixture
async def world(receiver: Receiver, request: pytest.FixtureRequest) -> AsyncIterator[World]:
    options: dict[str, Any] = getattr(request, "param", {})
    clock = xjobs.ManualClock()
    holder: list[xjobs.App] = []
    handle = webhook(
        endpoints=_endpoints(receiver),
        ledger=lambda: holder[0].backend.webhooks,
        clock=clock,
        allow_private=True,  # the receiver is on 127.0.0.1
        **{"disable_after": 3, **options},
    )
    app = xjobs.App(backend="memory://", jobs=[handle], clock=clock)
    holder.append(app)
    async with app:
        yield World(app, handle, clock, receiver)


def _org(**fields: Any) -> dict[str, Any]:
    return {"org_id": "org-a", **fields}


@pytest.mark.asyncio
async def test_a_delivery_is_signed_verified_by_the_receiver_and_recorded(world: World) -> None:
    job_id = await world.send("ok", **_org(id="msg_one"))
    await world.run()
    record = await world.app.get_job(job_id)
    assert record.state == "completed"
    assert await world.handle.result(job_id) == {"status": 200, "attempt": 1}
    (seen,) = world.receiver.seen
    assert (seen.message_id, seen.verified) == ("msg_one", True)
    assert seen.payload["type"] == "invoice.paid"
    assert seen.payload["data"] == {"n": 1}
    (attempt,) = await world.ledger.attempts("ok")
    assert (attempt.status, attempt.http_status, attempt.excerpt) == (
        "delivered",
        200,
        "answer 200",
    )
    assert (attempt.message_id, attempt.job_id, attempt.attempt) == ("msg_one", job_id, 1)


@pytest.mark.asyncio
async def test_a_5xx_is_recorded_then_retried_with_the_same_webhook_id(world: World) -> None:
    world.receiver.scripts["/flaky"] = [503, 200]
    job_id = await world.send("flaky", **_org())
    await world.run()
    retrying = await world.app.get_job(job_id)
    assert retrying.state == "ready"
    assert "XJOBS_WEBHOOK_FAILED" in (retrying.last_error or "")
    (failed,) = await world.ledger.attempts("flaky")
    assert (failed.status, failed.http_status, failed.attempt) == ("failed", 503, 1)

    await world.later(retrying.run_at_ms - world.clock.now_ms())
    assert (await world.app.get_job(job_id)).state == "completed"
    first, second = world.receiver.seen
    assert first.message_id == second.message_id
    assert first.verified
    assert second.verified
    assert [a.status for a in await world.ledger.attempts("flaky")] == ["delivered", "failed"]
    assert (await world.ledger.state("flaky")).failures == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
async def test_a_408_429_or_5xx_is_retried(world: World, status: int) -> None:
    world.receiver.scripts["/busy"] = [status]
    job_id = await world.send("busy", **_org())
    await world.run()
    assert (await world.app.get_job(job_id)).state == "ready"


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
async def test_another_4xx_is_terminal(world: World, status: int) -> None:
    world.receiver.scripts["/gone"] = [status]
    job_id = await world.send("gone", **_org())
    await world.run()
    record = await world.app.get_job(job_id)
    assert (record.state, record.attempt) == ("dead", 1)
    assert "XJOBS_WEBHOOK_REJECTED" in (record.last_error or "")
    (attempt,) = await world.ledger.attempts("gone")
    assert (attempt.status, attempt.http_status) == ("rejected", status)


@pytest.mark.asyncio
async def test_retry_after_is_honoured_over_a_shorter_backoff(world: World) -> None:
    world.receiver.scripts["/busy"] = [429]
    world.receiver.retry_after["/busy"] = "3600"
    job_id = await world.send("busy", **_org())
    settled_at = world.clock.now_ms()
    await world.run()
    record = await world.app.get_job(job_id)
    assert (record.state, record.run_at_ms) == ("ready", settled_at + 3_600_000)


def test_retry_after_reads_seconds_or_an_http_date_bounded() -> None:
    now = 1_800_000_000.0
    date = format_datetime(datetime.fromtimestamp(now + 90, UTC), usegmt=True)
    assert retry_after_ms("120", now) == 120_000
    assert retry_after_ms(date, now) == 90_000
    assert retry_after_ms("9999999", now) == MAX_RETRY_AFTER_MS
    assert retry_after_ms(format_datetime(datetime.fromtimestamp(now - 5, UTC)), now) == 0
    assert [retry_after_ms(v, now) for v in (None, "", "soon", "-3")] == [None] * 4


@pytest.mark.asyncio
async def test_a_redirect_is_refused_and_never_followed(world: World) -> None:
    job_id = await world.send("redirect", **_org())
    await world.run()
    record = await world.app.get_job(job_id)
    assert record.state == "dead"
    assert "redirect" in (record.last_error or "")
    assert [s.path for s in world.receiver.seen] == ["/redirect"]
    (attempt,) = await world.ledger.attempts("redirect")
    assert (attempt.status, attempt.http_status) == ("rejected", 302)


@pytest.mark.asyncio
@pytest.mark.parametrize("world", [{"request_timeout": timedelta(seconds=0.3)}], indirect=True)
async def test_a_slow_answer_past_the_request_timeout_is_recorded_and_retried(world: World) -> None:
    job_id = await world.send("slow", **_org())
    await world.run()
    assert (await world.app.get_job(job_id)).state == "ready"
    (attempt,) = await world.ledger.attempts("slow")
    assert (attempt.status, attempt.http_status) == ("failed", None)
    assert "did not answer within 0.3 s" in (attempt.error or "")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "world",
    [{"request_timeout": timedelta(seconds=10), "timeout": timedelta(seconds=0.3)}],
    indirect=True,
)
async def test_a_cancelled_attempt_is_not_recorded(world: World) -> None:
    job_id = await world.send("slow", **_org())
    await world.run()
    record = await world.app.get_job(job_id)
    assert "XJOBS_TIMEOUT" in (record.last_error or "")
    assert len(world.receiver.seen) == 1
    assert await world.ledger.attempts("slow") == []


@pytest.mark.asyncio
async def test_a_run_of_failures_disables_the_endpoint_which_is_then_never_dialled(
    world: World,
) -> None:
    world.receiver.scripts["/down"] = [500]
    job_id = await world.send("down", **_org())
    for _ in range(3):
        await world.run()
        record = await world.app.get_job(job_id)
        if record.state != "ready":
            break
        await world.later(record.run_at_ms - world.clock.now_ms())
    assert (record.state, record.attempt) == ("dead", 3)
    assert "XJOBS_WEBHOOK_ENDPOINT_DISABLED" in (record.last_error or "")
    assert (await world.ledger.state("down")).disabled
    dialled = len(world.receiver.seen)

    second = await world.send("down", **_org())
    await world.run()
    refused = await world.app.get_job(second)
    assert (refused.state, refused.attempt) == ("dead", 1)
    assert "XJOBS_WEBHOOK_ENDPOINT_DISABLED" in (refused.last_error or "")
    assert len(world.receiver.seen) == dialled
    skipped = (await world.ledger.attempts("down"))[0]
    assert (skipped.status, skipped.job_id, skipped.http_status) == ("skipped", second, None)

    assert await world.ledger.enable("down") is True
    world.receiver.scripts["/down"] = [200]
    third = await world.send("down", **_org())
    await world.run()
    assert (await world.app.get_job(third)).state == "completed"


@pytest.mark.asyncio
async def test_an_event_without_an_org_is_refused_at_enqueue(world: World) -> None:
    with pytest.raises(TenantMismatchError) as refused:  # the seed's code, not KEY_UNDERIVABLE
        await world.send("ok")
    assert refused.value.code == "XJOBS_JOB_TENANT_MISMATCH"
    assert world.receiver.seen == []
    assert (await world.app.run_worker(until_idle=True)).claimed == 0  # nothing was written


@pytest.mark.asyncio
async def test_an_endpoint_of_another_org_is_a_terminal_mismatch_never_dialled(
    world: World,
) -> None:
    job_id = await world.send("other-org", **_org())
    await world.run()
    record = await world.app.get_job(job_id)
    assert (record.state, record.attempt) == ("dead", 1)
    assert "XJOBS_JOB_TENANT_MISMATCH" in (record.last_error or "")
    assert world.receiver.seen == []
    assert await world.ledger.attempts("other-org") == []  # org-b's ledger is not org-a's to write


@pytest.mark.asyncio
async def test_an_unknown_endpoint_is_terminal(world: World) -> None:
    job_id = await world.send("nowhere", **_org())
    await world.run()
    record = await world.app.get_job(job_id)
    assert record.state == "dead"
    assert "XJOBS_WEBHOOK_ENDPOINT_UNKNOWN" in (record.last_error or "")
    assert await world.ledger.attempts("nowhere") == []  # no endpoint: no ledger of anyone's


@pytest.mark.asyncio
async def test_a_cross_tenant_webhook_needs_no_org(receiver: Receiver) -> None:
    clock = xjobs.ManualClock()
    holder: list[xjobs.App] = []
    endpoints = {"ok": Endpoint(url=f"{receiver.url}/ok", secrets=(SECRET,))}
    handle = webhook(
        endpoints=lambda name: endpoints.get(name),
        ledger=lambda: holder[0].backend.webhooks,
        tenant="none",
        name="system_webhook",
        allow_private=True,
    )
    app = xjobs.App(backend="memory://", jobs=[handle], clock=clock)
    holder.append(app)
    async with app:
        result = await handle.enqueue(WebhookEvent(endpoint="ok", type="system.ping"))
        await app.run_worker(until_idle=True)
        assert (await app.get_job(result.job_id)).state == "completed"
    assert [s.verified for s in receiver.seen] == [True]


@pytest.mark.asyncio
async def test_an_async_endpoint_lookup_is_awaited(receiver: Receiver) -> None:
    async def lookup(name: str) -> Endpoint | None:
        await asyncio.sleep(0)
        return Endpoint(url=f"{receiver.url}/ok", secrets=[SECRET], org_id="org-a")  # type: ignore[arg-type]

    holder: list[xjobs.App] = []
    handle = webhook(
        endpoints=lookup, ledger=lambda: holder[0].backend.webhooks, allow_private=True
    )
    app = xjobs.App(backend="memory://", jobs=[handle], clock=xjobs.ManualClock())
    holder.append(app)
    async with app:
        event = WebhookEvent(endpoint="anything", type="t", org_id="org-a")
        job_id = (await handle.enqueue(event)).job_id
        await app.run_worker(until_idle=True)
        assert (await app.get_job(job_id)).state == "completed"


def test_bad_declarations_and_endpoints_are_refused() -> None:
    with pytest.raises(DeclarationInvalidError):
        webhook(endpoints={}, ledger=lambda: None, tenant="everyone")  # type: ignore[arg-type]
    with pytest.raises(DeclarationInvalidError):
        webhook(endpoints={}, ledger=None)  # type: ignore[arg-type]
    with pytest.raises(xjobs.XJobsError) as refused:
        Endpoint(url="ftp://example.com/x", secrets=(SECRET,))
    assert refused.value.code == "XJOBS_WEBHOOK_INVALID"
    with pytest.raises(xjobs.XJobsError):
        Endpoint(url="https://example.com/x", secrets=())
    with pytest.raises(xjobs.XJobsError):
        Endpoint(url="https://example.com/x", secrets=("not-a-secret",))


def test_a_bad_event_is_refused_by_its_model() -> None:
    with pytest.raises(ValueError, match="endpoint id"):
        WebhookEvent(endpoint="a b", type="t")
    with pytest.raises(ValueError, match="message id"):
        WebhookEvent(endpoint="ok", type="t", id="has space")
    event = WebhookEvent(endpoint="ok", type="t")
    assert event.id.startswith("msg_")
    assert event.id != WebhookEvent(endpoint="ok", type="t").id
    assert json.loads(event.model_dump_json())["timestamp"]


def test_without_httpx_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(ExtraMissingError, match=r"xjobs-core\[webhook\]"):
        httpx_module()
