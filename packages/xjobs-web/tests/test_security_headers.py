"""Every answer carries the security headers (no framing, no sniffing, no foreign script, no
Referer), and no page showing job data may be cached."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from xjobs_web import basic_auth

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

CREDENTIALS = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}


@pytest.fixture(scope="module")
def guarded(serve: Serve) -> Iterator[Served]:
    with serve("memory", mount="/ops", auth=basic_auth("ops", "pw")) as s:
        yield s


def _secured(headers: dict[str, str]) -> None:
    low = {k.lower(): v for k, v in headers.items()}
    policy = low["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy
    assert "default-src 'none'" in policy
    assert low["x-frame-options"] == "DENY"
    assert low["x-content-type-options"] == "nosniff"
    assert low["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/ops/", 200),
        ("/ops/jobs", 200),
        ("/ops/jobs/no-such-job", 404),
        ("/ops/failures", 200),
        ("/ops/tasks", 200),
        ("/ops/workers", 200),
    ],
)
def test_every_page_is_secured_and_never_cached(
    guarded: Served, client: type[Http], path: str, expected: int
) -> None:
    status, headers, _ = client(guarded.url(""), CREDENTIALS).request("GET", path)
    assert status == expected
    _secured(headers)
    assert {k.lower(): v for k, v in headers.items()}["cache-control"] == "no-store"


def test_refusals_and_static_files_are_secured_too(guarded: Served, client: type[Http]) -> None:
    anonymous = client(guarded.url(""))
    status, headers, _ = anonymous.request("GET", "/ops/jobs")
    assert status == 401
    _secured(headers)
    assert {k.lower(): v for k, v in headers.items()}["cache-control"] == "no-store"
    http = client(guarded.url(""), CREDENTIALS)
    status, headers, _ = http.request("POST", "/ops/act", [("verb", "retry")])
    assert status == 403
    _secured(headers)
    for path in ("/ops/static/xjobs.css", "/ops/no-such-page"):
        _, headers, _ = http.request("GET", path)
        _secured(headers)
    status, headers, _ = client(guarded.url(""), {"Host": "evil.example"}).request("GET", "/ops/")
    assert status == 400
    _secured(headers)
