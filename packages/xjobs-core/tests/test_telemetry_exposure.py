"""The telemetry server binds loopback by default, and `/readyz` answers a coded reason, never an
exception's text (issue 40, item 12)."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request

import pytest

from xjobs.errors import BackendUnavailableError
from xjobs.observe.health import Liveness
from xjobs.observe.http_server import DEFAULT_HOST, Endpoints, TelemetryServer

SECRET_TEXT = "could not reach postgresql://app:hunter2@db.internal:5432/x as app"


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_the_default_host_is_loopback() -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    server = TelemetryServer(DEFAULT_HOST, 0, Endpoints(None, Liveness(), None, None)).start()
    try:
        assert server._server.server_address[0] == "127.0.0.1"
    finally:
        server.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (OSError(SECRET_TEXT), "probe-failed"),
        (BackendUnavailableError(SECRET_TEXT), "XJOBS_BACKEND_UNAVAILABLE"),
        (TimeoutError(SECRET_TEXT), "probe-timeout"),
    ],
)
async def test_readyz_answers_a_coded_reason_and_logs_the_detail(
    error: Exception, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def probe() -> object:
        raise error

    loop = asyncio.get_running_loop()
    server = TelemetryServer(DEFAULT_HOST, 0, Endpoints(None, Liveness(), probe, loop)).start()
    try:
        with caplog.at_level(logging.WARNING, logger="xjobs.observe.health"):
            status, body = await asyncio.to_thread(_get, server.port, "/readyz")
    finally:
        server.close()
    assert (status, body) == (503, {"status": "unready", "reason": reason})
    (record,) = [r for r in caplog.records if r.getMessage() == "jobs.readyz.unready"]
    assert record.exc_info is not None
    assert SECRET_TEXT in str(record.exc_info[1])
