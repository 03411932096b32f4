"""The tenant hook fails closed: an answer of None or "" (a user it finds no tenant for) denies the
request with 403 and shows no job; only the explicit `ALL_TENANTS` grants every tenant."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from starlette.requests import Request

from xjobs_web import ALL_TENANTS, AllTenants, basic_auth_users, basic_user

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]
USERS = {"acme-ops": "pw1", "admin": "pw2", "drifter": "pw3"}
ORGS: dict[str, str | AllTenants] = {"acme-ops": "acme", "admin": ALL_TENANTS}


def _as(user: str) -> dict[str, str]:
    pair = f"{user}:{USERS[user]}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def _org_of_user(request: Request) -> str | AllTenants | None:
    """The tenant of the authenticated user (drifter has none: None)."""
    return ORGS.get(basic_user(request) or "")


def _dead_export(s: Served, org: str, report: str) -> str:
    s.module.FAILING.add(report)
    job_id = s.as_org(org, s.module.export.enqueue(s.module.Export(org=org, report=report)))
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id.job_id)


@pytest.mark.parametrize("answer", [None, ""])
def test_a_hook_answering_no_tenant_denies_every_page_and_action(
    serve: Serve, client: type[Http], answer: str | None
) -> None:
    def nobody(request: Request) -> str | None:
        return answer

    with serve("memory", auth=basic_auth_users(USERS), tenant=nobody) as s:
        job_id = _dead_export(s, "acme", f"deny-{answer!r}")
        http = client(s.url(""), _as("drifter"))
        for path in ("/", "/jobs", f"/jobs/{job_id}", "/failures", "/tasks", "/workers"):
            status, body = http.get(path)
            assert status == 403, path
            assert "XJOBS_DASHBOARD_TENANT_DENIED" in body
            assert job_id not in body
            assert "acme" not in body
        bulk = [("verb", "retry"), ("scope", "filter"), ("state", "dead"), ("confirmed", "1")]
        status, _, body = http.post("/act", [("csrf", "0" * 64), *bulk])
        assert status == 403
        assert str(s.call(s.app.get_job(job_id)).state) == "dead"


def test_the_tenant_comes_from_the_authenticated_user_and_all_tenants_is_explicit(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", auth=basic_auth_users(USERS), tenant=_org_of_user) as s:
        ours = _dead_export(s, "acme", "scope-ours")
        theirs = _dead_export(s, "globex", "scope-theirs")

        acme = client(s.url(""), {**_as("acme-ops"), "X-Org": "globex"})
        page = acme.get("/jobs")[1]
        assert ours in page
        assert theirs not in page  # a header the client picks does not widen its scope

        page = client(s.url(""), _as("admin")).get("/jobs")[1]
        assert ours in page
        assert theirs in page

        assert client(s.url(""), _as("drifter")).get("/jobs")[0] == 403
