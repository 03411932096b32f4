"""A real HTTP receiver for the webhook e2e tests: `http.server` on a thread, every request's signature verified.

`/hang` holds its first request until the test releases it (the worker is killed meanwhile);
`/flaky` answers 503 once, then 200; `/gone` answers 410; `/bomb` answers 200 with a body of
331 bytes in `Content-Encoding: gzip, gzip` that inflates to 100 MiB; anything else 200.
"""

from __future__ import annotations

import functools
import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from xjobs.factories import WebhookSignatureError, verify

HOLD_S = 60.0
BOMB_MIB = 100


@functools.cache
def bomb() -> bytes:
    """`BOMB_MIB` MiB of zeros, gzipped twice."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    layer = b"".join(inner.compress(zeros) for _ in range(BOMB_MIB)) + inner.flush()
    return gzip.compress(layer, 9)


@dataclass
class Receiver:
    """What the receiver saw: per request its path, its webhook-id and whether it verified."""

    secret: str
    url: str = ""
    seen: list[tuple[str, str, bool]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    bomb: bytes = field(default_factory=bomb)

    def answer(self, path: str) -> int:
        """The status for a request to `path`, the n-th one to it (holding the first to /hang)."""
        with self.lock:
            count = sum(1 for seen in self.seen if seen[0] == path)
        if path == "/hang" and count == 1:
            self.arrived.set()
            self.release.wait(HOLD_S)
        if path == "/flaky" and count == 1:
            return 503
        return 410 if path == "/gone" else 200


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            try:
                verify(receiver.secret, dict(self.headers), body)
                verified = True
            except WebhookSignatureError:
                verified = False
            with receiver.lock:
                receiver.seen.append((self.path, self.headers.get("webhook-id", ""), verified))
            status = receiver.answer(self.path)
            answer, encoding = (
                (receiver.bomb, "gzip, gzip") if self.path == "/bomb" else (b"ok", "")
            )
            try:
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                if encoding:
                    self.send_header("content-encoding", encoding)
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the worker that sent it was killed

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads `receiver.seen`."""

    return Handler


@contextmanager
def receiving(secret: str) -> Iterator[Receiver]:
    """A receiver on a free local port, shut down on exit (a held request is released first)."""
    receiver = Receiver(secret)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
