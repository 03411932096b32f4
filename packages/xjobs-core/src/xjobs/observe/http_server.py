"""The telemetry HTTP endpoint of a role process: `/metrics`, `/healthz`, `/readyz`, on a thread of its own.

A thread, not the event loop: a loop that is blocked must still be reported unhealthy. It binds
loopback unless given another host: metrics name queues and jobs, and nothing here authenticates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from xjobs.observe.health import Liveness, Probe, Verdict, readiness
from xjobs.observe.metrics import Metrics

log = logging.getLogger("xjobs.observe.http")
# Where the role commands' server listens unless `--telemetry-host` names another address
# (`0.0.0.0` or an interface's address opens it to the network).
DEFAULT_HOST: Final = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Endpoints:
    """What one server answers: metrics (or none), liveness and readiness (or none)."""

    metrics: Metrics | None
    liveness: Liveness | None
    probe: Probe | None
    loop: asyncio.AbstractEventLoop | None


class _Handler(BaseHTTPRequestHandler):
    endpoints: Endpoints

    def do_GET(self) -> None:
        """Route one GET."""
        path = self.path.split("?", 1)[0]
        ends = self.endpoints
        if path == "/metrics" and ends.metrics is not None:
            body, kind = ends.metrics.exposition()
            self._send(200, body, kind)
        elif path == "/healthz" and ends.liveness is not None:
            self._verdict(ends.liveness.verdict())
        elif path == "/readyz" and ends.probe is not None and ends.loop is not None:
            self._verdict(readiness(ends.probe, ends.loop, liveness=ends.liveness))
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _verdict(self, verdict: Verdict) -> None:
        body = json.dumps(verdict.detail).encode() + b"\n"
        self._send(200 if verdict.ok else 503, body, "application/json")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (a probe every few seconds would flood the log)."""


class TelemetryServer:
    """A `ThreadingHTTPServer` on a daemon thread; `close()` stops it."""

    def __init__(self, host: str, port: int, endpoints: Endpoints) -> None:
        handler = type("TelemetryHandler", (_Handler,), {"endpoints": endpoints})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="xjobs-telemetry", daemon=True
        )

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the one picked for port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> TelemetryServer:
        """Serve on the thread."""
        self._thread.start()
        host = self._server.server_address[0]
        log.info("jobs.telemetry.serving", extra={"host": host, "port": self.port})
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
