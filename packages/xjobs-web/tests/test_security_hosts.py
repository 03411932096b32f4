"""DNS rebinding: a page whose own name resolves to the dashboard's address sends its own Host; the
dashboard answers only loopback names and its `allowed_hosts`, so that page reads no job and moves
none, even with the operator's credentials cached in the browser."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from xjobs_web import basic_auth

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]
CREDENTIALS = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}


def _dead_export(s: Served, report: str) -> str:
    s.module.FAILING.add(report)
    job_id = s.as_org("acme", s.module.export.enqueue(s.module.Export(org="acme", report=report)))
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id.job_id)


@pytest.fixture(scope="module")
def guarded(serve: Serve) -> Iterator[Served]:
    with serve("memory", auth=basic_auth("ops", "pw")) as s:
        yield s


def test_a_rebinding_page_reads_no_job(guarded: Served, client: type[Http]) -> None:
    job_id = _dead_export(guarded, "rebind-read")
    evil = client(guarded.url(""), {**CREDENTIALS, "Host": f"evil.example:{guarded.port}"})
    for path in ("/", "/jobs", f"/jobs/{job_id}", "/failures", "/workers", "/static/xjobs.js"):
        status, body = evil.get(path)
        assert status == 400, path
        assert "XJOBS_DASHBOARD_HOST_REFUSED" in body
        assert job_id not in body
        assert "acme" not in body
        assert "TimeoutError" not in body


def test_a_rebinding_page_moves_no_job_even_with_a_valid_token(
    guarded: Served, client: type[Http], token_of: Token
) -> None:
    job_id = _dead_export(guarded, "rebind-post")
    http = client(guarded.url(""), CREDENTIALS)
    token = token_of(http.get(f"/jobs/{job_id}")[1])
    http.headers["Host"] = f"evil.example:{guarded.port}"
    form = [("csrf", token), ("verb", "retry"), ("scope", "ids"), ("id", job_id)]
    status, _, body = http.post("/act", [*form, ("confirmed", "1")])
    assert status == 400
    assert "XJOBS_DASHBOARD_HOST_REFUSED" in body
    assert str(guarded.call(guarded.app.get_job(job_id)).state) == "dead"


@pytest.mark.parametrize("name", ["localhost", "127.0.0.1", "[::1]", "LOCALHOST"])
def test_the_loopback_names_on_its_port_are_answered(
    guarded: Served, client: type[Http], name: str
) -> None:
    http = client(guarded.url(""), {**CREDENTIALS, "Host": f"{name}:{guarded.port}"})
    assert http.get("/jobs")[0] == 200


@pytest.mark.parametrize("host", ["localhost:1", "localhost.evil.example", "127.0.0.1.nip.io", ""])
def test_a_loopback_lookalike_or_another_port_is_refused(
    guarded: Served, client: type[Http], host: str
) -> None:
    http = client(guarded.url(""), {**CREDENTIALS, "Host": host})
    assert http.get("/jobs")[0] == 400


def test_a_mounted_dashboard_answers_its_allowed_hosts_and_loopback_only(
    serve: Serve, client: type[Http]
) -> None:
    auth = basic_auth("ops", "pw")
    with serve("memory", mount="/ops", auth=auth, allowed_hosts=["jobs.example.com"]) as s:

        def status(host: str) -> int:
            return client(s.url(""), {**CREDENTIALS, "Host": host}).get("/ops/jobs")[0]

        assert status("jobs.example.com") == 200
        assert status(f"jobs.example.com:{s.port}") == 200
        assert status(f"localhost:{s.port}") == 200
        assert status("evil.example") == 400
        assert status("jobs.example.com.evil.example") == 400
        # the service's own pages are not the dashboard's to guard
        assert client(s.url(""), {"Host": "evil.example"}).get("/")[0] == 200


def test_allowed_hosts_star_answers_any_host(serve: Serve, client: type[Http]) -> None:
    with serve("memory", auth=basic_auth("ops", "pw"), allowed_hosts=["*"]) as s:
        http = client(s.url(""), {**CREDENTIALS, "Host": "anything.example"})
        assert http.get("/jobs")[0] == 200
