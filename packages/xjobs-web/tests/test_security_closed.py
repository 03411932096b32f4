"""Closed by default: a dashboard nobody authenticates is refused when it is built, unless it only
looks and only loopback reaches it (plain `xjobs web`), or the loud opt-out is passed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import xjobs
from xjobs_web import basic_auth, dashboard
from xjobs_web.errors import DashboardAuthRequiredError, DashboardOptionInvalidError
from xjobs_web.serve import server

if TYPE_CHECKING:
    from conftest import Http

HERE = Path(__file__).parent


def test_a_dashboard_without_auth_is_refused_saying_what_to_pass() -> None:
    with pytest.raises(DashboardAuthRequiredError) as refused:
        dashboard(xjobs.App("memory://"))
    assert refused.value.code == "XJOBS_DASHBOARD_AUTH_REQUIRED"
    assert "auth=" in refused.value.message
    assert "unsafe_no_auth=True" in refused.value.message


@pytest.mark.parametrize(
    "options",
    [{"read_only": True}, {"read_only": True, "tenant": lambda request: "acme"}],
)
def test_a_mounted_read_only_dashboard_without_auth_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(DashboardAuthRequiredError):
        dashboard(xjobs.App("memory://"), **options)


def test_a_read_only_dashboard_bound_beyond_loopback_without_auth_is_refused() -> None:
    with pytest.raises(DashboardAuthRequiredError):
        server(xjobs.App("memory://"), host="0.0.0.0", port=8080, read_only=True)


def test_any_host_without_auth_is_refused_even_read_only_on_loopback() -> None:
    with pytest.raises(DashboardAuthRequiredError):
        server(xjobs.App("memory://"), port=8080, read_only=True, allowed_hosts=["*"])


def test_the_opt_out_and_auth_together_are_refused() -> None:
    with pytest.raises(DashboardOptionInvalidError):
        dashboard(xjobs.App("memory://"), auth=basic_auth("ops", "pw"), unsafe_no_auth=True)


def test_auth_or_the_loud_opt_out_builds_a_dashboard_that_can_act() -> None:
    app = xjobs.App("memory://")
    assert dashboard(app, auth=basic_auth("ops", "pw")) is not None
    assert dashboard(app, unsafe_no_auth=True) is not None


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_plain_xjobs_web_serves_a_read_only_dashboard_that_cannot_act(
    client: type[Http], tmp_path: Path
) -> None:
    port = _free_port()
    env = {**os.environ, "XJOBS_WEB_TEST_URL": "memory://"}
    env.pop("XJOBS_WEB_PASSWORD", None)
    command = [sys.executable, "-m", "xjobs_cli", "web", "webapp:app", "--port", str(port)]
    log = (tmp_path / "web.log").open("w+")
    process = subprocess.Popen(command, cwd=HERE, env=env, stderr=log)
    try:
        http = client(f"http://127.0.0.1:{port}")
        status, page = 0, ""
        for _ in range(300):  # until the process listens (bounded: 300 tries)
            try:
                status, page = http.get("/")
                break
            except OSError:
                if process.poll() is not None:
                    break
                threading.Event().wait(0.1)
        assert status == 200, log.seek(0) or log.read()
        assert 'method="post"' not in page
        form = [("csrf", "0" * 64), ("kind", "queue"), ("name", "mail"), ("op", "pause")]
        status, _, body = http.post("/pause", form)
        assert status == 403
        assert "XJOBS_ACTION_REFUSED" in body
        assert "paused" not in http.get("/")[1]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        log.close()
    assert code == 0
    assert "(read-only: --basic-auth USER to act)" in (tmp_path / "web.log").read_text()


def test_xjobs_web_beyond_loopback_without_auth_refuses_to_start() -> None:
    env = {**os.environ, "XJOBS_WEB_TEST_URL": "memory://"}
    command = [sys.executable, "-m", "xjobs_cli", "web", "webapp:app", "--host", "0.0.0.0"]
    command += ["--port", str(_free_port())]
    done = subprocess.run(command, cwd=HERE, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "XJOBS_DASHBOARD_AUTH_REQUIRED" in done.stderr
