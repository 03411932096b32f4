"""`webhook()` against hostile endpoints: an address inside (in any literal form, or behind a name)
is refused before any connect, the request dials the address it checked, and an answer is read
as sent, bounded, never decoded (a decompression bomb stays 331 bytes).

Every test runs under an audit hook that sees each socket connect and each name lookup of the
process and refuses a connect anywhere but loopback: no test traffic leaves this machine, even
when the code under test is wrong. Receivers are raw asyncio servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gzip
import sys
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from ipaddress import IPv6Address, ip_address
from typing import Any

import pytest
import pytest_asyncio

import xjobs
from xjobs.contract.webhooks import MAX_EXCERPT_CHARS, WebhookAttempt, WebhookLedger
from xjobs.factories import Endpoint, WebhookEvent, new_secret, webhook
from xjobs.factories.webhook_address import address_class

SECRET = new_secret()
MIB = 1 << 20
# Well under the 100 MiB the bomb inflates to, well over what a bounded attempt allocates.
MEMORY_BOUND = 16 * MIB


@dataclass
class Watch:
    """What the process dialled and looked up while a test ran."""

    connects: list[tuple[str, int]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)


WATCHING: list[Watch] = []


def _loopback(host: str) -> bool:
    ip = ip_address(host.partition("%")[0])
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not WATCHING:
        return
    if event == "socket.connect" and isinstance(args[1], tuple):
        host, port = str(args[1][0]), int(args[1][1])
        WATCHING[-1].connects.append((host, port))
        if not _loopback(host):
            raise ConnectionRefusedError(f"test guard: refused a connect to {host}:{port}")
    elif event == "socket.getaddrinfo":
        WATCHING[-1].lookups.append(str(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def watch() -> Iterator[Watch]:
    found = Watch()
    WATCHING.append(found)
    try:
        yield found
    finally:
        WATCHING.remove(found)


@dataclass
class RawReceiver:
    """Answers every request with `answer` (raw bytes after the status line's headers), and keeps
    each request's head; `body_chunks` more chunks of `chunk` follow the answer when set."""

    answer: bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
    chunk: bytes = b""
    body_chunks: int = 0
    heads: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")[1:]
            fields = dict(line.split(": ", 1) for line in lines if ": " in line)
            self.heads.append({k.lower(): v for k, v in fields.items()})
            await reader.readexactly(int(self.heads[-1].get("content-length", "0")))
            writer.write(self.answer)
            for _ in range(self.body_chunks):
                writer.write(self.chunk)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the sender stopped reading: what the bounded read does
        finally:
            writer.close()


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[RawReceiver]:
    found = RawReceiver()
    server = await asyncio.start_server(found.serve, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    async with server:
        yield found


async def _deliver(url: str, **options: Any) -> tuple[xjobs.JobRecord, list[WebhookAttempt]]:
    """One event to `url` through a worker on the memory backend: the job and its ledger."""
    holder: list[xjobs.App] = []
    handle = webhook(
        endpoints={"hook": Endpoint(url=url, secrets=(SECRET,), org_id="org-a")},
        ledger=lambda: holder[0].backend.webhooks,
        **options,
    )
    app = xjobs.App(backend="memory://", jobs=[handle], clock=xjobs.ManualClock())
    holder.append(app)
    async with app:
        event = WebhookEvent(endpoint="hook", type="t", org_id="org-a")
        job_id = (await handle.enqueue(event)).job_id
        await app.run_worker(until_idle=True)
        ledger: WebhookLedger | None = app.backend.webhooks
        assert ledger is not None
        return await app.get_job(job_id), await ledger.attempts("hook")


# Each refused class, as a literal in the forms a resolver reads, or as a name; `{port}` is the
# live receiver's, so a loopback form that were dialled would be seen arriving.
REFUSED = [
    "127.0.0.1:{port}",
    "[::1]:{port}",
    "0x7f000001:{port}",
    "2130706433:{port}",
    "127.1:{port}",
    "0177.0.0.1:{port}",
    "[::ffff:127.0.0.1]:{port}",
    "localhost:{port}",
    "0.0.0.0:{port}",
    "[::]:{port}",
    "169.254.169.254",
    "[fe80::1]",
    "[fd00:ec2::254]",
    "100.100.100.200",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "[fd12:3456::1]",
    "224.0.0.1",
    "[ff02::1]",
    "240.0.0.1",
    "[::ffff:169.254.169.254]",
    "[64:ff9b::a9fe:a9fe]",
    "[2002:a00:1::]",
]
# Refused even with allow_private=True: link-local, metadata, multicast, unspecified, reserved.
REFUSED_ALWAYS = [
    "0.0.0.0:{port}",
    "169.254.169.254",
    "[fe80::1]",
    "[fd00:ec2::254]",
    "100.100.100.200",
    "224.0.0.1",
    "240.0.0.1",
    "[64:ff9b::a9fe:a9fe]",
]


@pytest.mark.asyncio
@pytest.mark.parametrize("authority", REFUSED)
async def test_an_address_inside_is_refused_terminally_and_never_dialled(
    authority: str, receiver: RawReceiver, watch: Watch
) -> None:
    record, attempts = await _deliver(f"http://{authority.format(port=receiver.port)}/hook")
    assert (record.state, record.attempt) == ("dead", 1)
    assert "XJOBS_WEBHOOK_ADDRESS_REFUSED" in (record.last_error or "")
    ((attempt),) = attempts
    assert (attempt.status, attempt.http_status, attempt.excerpt) == ("skipped", None, "")
    assert "XJOBS_WEBHOOK_ADDRESS_REFUSED" in (attempt.error or "")
    assert watch.connects == []
    assert receiver.heads == []


@pytest.mark.asyncio
@pytest.mark.parametrize("authority", REFUSED_ALWAYS)
async def test_allow_private_never_opens_link_local_metadata_or_reserved_addresses(
    authority: str, receiver: RawReceiver, watch: Watch
) -> None:
    url = f"http://{authority.format(port=receiver.port)}/hook"
    record, _ = await _deliver(url, allow_private=True)
    assert "XJOBS_WEBHOOK_ADDRESS_REFUSED" in (record.last_error or "")
    assert watch.connects == []


@pytest.mark.asyncio
async def test_allow_private_reaches_a_loopback_receiver_by_name_dialling_the_address_checked(
    receiver: RawReceiver, watch: Watch
) -> None:
    record, (attempt,) = await _deliver(
        f"http://localhost:{receiver.port}/hook", allow_private=True
    )
    assert (record.state, attempt.status, attempt.excerpt) == ("completed", "delivered", "ok")
    assert receiver.heads[0]["host"] == f"localhost:{receiver.port}"
    assert watch.connects == [("127.0.0.1", receiver.port)]
    # the name is looked up once, by the check; the connect only reads the checked literal
    assert watch.lookups.count("localhost") == 1
    assert {h for h in watch.lookups if h != "localhost"} <= {"127.0.0.1"}


def test_each_literal_form_is_judged_as_the_address_it_carries() -> None:
    judged = {
        text: address_class(ip_address(text))
        for text in (
            "::ffff:10.1.2.3",
            "64:ff9b::7f00:1",
            "2002:c0a8:101::1",
            "::7f00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "fec0::1",
            "192.0.2.1",
            "8.8.8.8",
            "64:ff9b::808:808",
            "2606:4700::1111",
        )
    }
    assert judged == {
        "::ffff:10.1.2.3": "private",
        "64:ff9b::7f00:1": "loopback",
        "2002:c0a8:101::1": "private",
        "::7f00:1": "loopback",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2": "reserved",
        "fec0::1": "private",
        "192.0.2.1": "reserved",
        "8.8.8.8": None,
        "64:ff9b::808:808": None,
        "2606:4700::1111": None,
    }


def _bomb() -> bytes:
    """100 MiB of zeros, gzipped twice: 331 bytes on the wire."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    layer = b"".join(inner.compress(zeros) for _ in range(100)) + inner.flush()
    return gzip.compress(layer, 9)


@pytest.mark.asyncio
async def test_a_stacked_gzip_bomb_is_never_decoded_and_the_attempt_is_recorded(
    receiver: RawReceiver, watch: Watch
) -> None:
    body = _bomb()
    receiver.answer = (
        b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip, gzip\r\n"
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )
    tracemalloc.start()
    try:
        record, (attempt,) = await _deliver(
            f"http://127.0.0.1:{receiver.port}/hook", allow_private=True
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
    assert (record.state, attempt.status, attempt.http_status) == ("completed", "delivered", 200)
    assert attempt.excerpt == "[not read: Content-Encoding 'gzip, gzip']"


@pytest.mark.asyncio
async def test_the_request_asks_for_identity(receiver: RawReceiver, watch: Watch) -> None:
    await _deliver(f"http://127.0.0.1:{receiver.port}/hook", allow_private=True)
    assert receiver.heads[0]["accept-encoding"] == "identity"


@pytest.mark.asyncio
async def test_an_endless_answer_is_read_no_further_than_the_excerpt(
    receiver: RawReceiver, watch: Watch
) -> None:
    receiver.answer = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n"
    receiver.chunk, receiver.body_chunks = b"x" * MIB, 64
    tracemalloc.start()
    try:
        _, (attempt,) = await _deliver(f"http://127.0.0.1:{receiver.port}/hook", allow_private=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BOUND
    assert attempt.excerpt == "x" * MAX_EXCERPT_CHARS


def test_an_endpoints_repr_shows_no_secret() -> None:
    endpoint = Endpoint(url="https://user:pw@hooks.example/x", secrets=(SECRET,), org_id="org-a")
    key = SECRET.removeprefix("whsec_")
    for shown in (repr(endpoint), str(endpoint), repr({"hook": endpoint})):
        assert key not in shown
        assert "pw" not in shown
    assert repr(endpoint) == (
        "Endpoint(url='https://hooks.example/x', secrets=<1 hidden>, org_id='org-a')"
    )
