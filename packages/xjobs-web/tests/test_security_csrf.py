"""The CSRF token is bound to who asks: a token taken (with its cookie) by one user is refused for
another, and over HTTPS the cookie is `__Host-` prefixed so a sibling subdomain cannot plant one."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.requests import Request

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]


def _basic(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:pw-{user}".encode()).decode()


def two_users(request: Request) -> bool:
    """Admits alice and mallory (each with their own password)."""
    return request.headers.get("authorization") in {_basic("alice"), _basic("mallory")}


def _dead_export(s: Served, report: str) -> str:
    s.module.FAILING.add(report)
    job_id = s.as_org("acme", s.module.export.enqueue(s.module.Export(org="acme", report=report)))
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id.job_id)


def test_a_token_taken_by_one_user_is_refused_for_another(
    serve: Serve, client: type[Http], token_of: Token
) -> None:
    with serve("memory", auth=two_users) as s:
        job_id = _dead_export(s, "csrf-bound")
        mallory = client(s.url(""), {"Authorization": _basic("mallory")})
        token = token_of(mallory.get(f"/jobs/{job_id}")[1])
        # alice's browser, with mallory's cookie planted in it, posts mallory's token
        alice = client(s.url(""), {"Authorization": _basic("alice")})
        alice.jar = mallory.jar
        alice.opener = mallory.opener
        form = [("csrf", token), ("verb", "retry"), ("scope", "ids"), ("id", job_id)]
        status, _, body = alice.post("/act", [*form, ("confirmed", "1")])
        assert status == 403
        assert "XJOBS_ACTION_REFUSED" in body
        assert str(s.call(s.app.get_job(job_id)).state) == "dead"
        # mallory's own post with it is answered
        assert mallory.post("/act", [*form, ("confirmed", "1")])[0] == 303


def test_a_secure_cookie_is_host_prefixed_even_under_a_mount(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", mount="/ops", auth=two_users, secure_cookies=True) as s:
        _, headers, _ = client(s.url(""), {"Authorization": _basic("alice")}).request(
            "GET", "/ops/"
        )
        cookie = {k.lower(): v for k, v in headers.items()}["set-cookie"]
        assert cookie.startswith("__Host-xjobs_csrf=")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"path=/", "secure", "httponly", "samesite=strict"} <= attributes
        assert not any(a.startswith("domain") for a in attributes)
