"""Every dashboard page reads through `app.operator.for_tenant(visit.tenant)`: the overview, the
tasks and the workers pages show only the tenant's jobs and counts as the jobs pages do; and the
confirm page's `next` is a path inside the dashboard's mount, nothing else."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from starlette.requests import Request

from xjobs.contract.driver import ClaimOptions
from xjobs.contract.stores import WorkerInfo
from xjobs.testing.rows import new_job
from xjobs_web import basic_auth
from xjobs_web.actions import safe_next

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

Token = Callable[[str], str]
LOGIN = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
AUTH = basic_auth("ops", "pw")


def _org(request: Request) -> str | None:
    return request.headers.get("x-org")


def _as(org: str) -> dict[str, str]:
    return {**LOGIN, "X-Org": org}


def _dead_export(s: Served, org: str, report: str) -> str:
    s.module.FAILING.add(report)
    job_id = s.as_org(org, s.module.export.enqueue(s.module.Export(org=org, report=report))).job_id
    s.work()
    s.module.FAILING.discard(report)
    return str(job_id)


def test_the_overview_counts_only_the_tenants_queues_and_withholds_the_counters(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", auth=AUTH, tenant=_org) as s:
        _dead_export(s, "acme", "o-ours")
        _dead_export(s, "globex", "o-theirs")
        s.as_org("globex", s.module.export.enqueue(s.module.Export(org="globex", report="o-2")))
        everyone = {q.queue: q for q in s.call(s.app.operator.queues())}
        assert (everyone["reports"].dead, everyone["reports"].ready) == (2, 1)

        status, page = client(s.url(""), _as("acme")).get("/")
        assert status == 200
        row = page.split("queue=reports", 1)[1].split("</tr>", 1)[0]
        # ready, scheduled, running, waiting, dead, failed: acme has one dead job and no other
        counts = [cell.split(">", 1)[1].split("<", 1)[0] for cell in row.split("state=")[1:]]
        assert counts == ["0", "0", "0", "0", "1", "0"]
        assert 'data-testid="counters-withheld"' in page


def test_the_workers_page_shows_only_the_tenants_running_jobs(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", auth=AUTH, tenant=_org) as s:
        m = s.module
        ours = s.as_org("acme", m.export.enqueue(m.Export(org="acme", report="w-1"))).job_id
        theirs = s.as_org("globex", m.export.enqueue(m.Export(org="globex", report="w-2"))).job_id
        now = s.app.clock.now_ms()
        assert s.app.backend.workers is not None
        info = WorkerInfo("w-scope", "host-1", 1, ("reports",), now, now)
        s.call(s.app.backend.workers.announce(info, 60_000))
        options = ClaimOptions(worker_id="w-scope", queues={"reports": 10}, lease_ms=60_000)
        assert len(s.call(s.app.backend.jobs.claim(options)).jobs) == 2

        status, page = client(s.url(""), _as("acme")).get("/workers")
        assert status == 200
        assert f"/jobs/{ours}" in page
        assert f"/jobs/{theirs}" not in page


def test_the_tasks_page_links_a_last_fire_only_to_the_tenants_job(
    serve: Serve, client: type[Http]
) -> None:
    with serve("memory", auth=AUTH, tenant=_org) as s:
        fired = new_job(name="export", queue="reports", tenant_id="acme")
        assert s.app.backend.scheduler is not None
        assert s.call(s.app.backend.scheduler.fire("nightly", None, 1_000, fired))

        acme = client(s.url(""), _as("acme")).get("/tasks")[1]
        globex = client(s.url(""), _as("globex")).get("/tasks")[1]
        assert "nightly" in acme
        assert "nightly" in globex
        assert f"/jobs/{fired.id}" in acme
        assert f"/jobs/{fired.id}" not in globex


# -- the confirm page's `next` ----------------------------------------------------------------------

HOSTILE_NEXT = [
    "//evil.example/x",
    "https://evil.example/",
    "javascript:alert(1)",
    "/\\evil.example",
    "\\\\evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/jobs/../../admin",
    "/%2e%2e/admin",
    "evil",
    "",
]


@pytest.mark.parametrize("value", HOSTILE_NEXT)
def test_a_next_outside_the_mount_is_replaced_by_the_default(value: str) -> None:
    assert safe_next(value, "/jobs") == "/jobs"


@pytest.mark.parametrize("value", ["/", "/jobs", "/jobs?state=dead&queue=reports", "/jobs/abc"])
def test_a_next_inside_the_mount_is_kept(value: str) -> None:
    assert safe_next(value) == value


@pytest.mark.parametrize("mount", ["", "/ops"])
def test_the_confirm_page_and_its_redirect_never_leave_the_mount(
    serve: Serve, client: type[Http], token_of: Token, mount: str
) -> None:
    with serve("memory", mount=mount or None, auth=AUTH) as s:
        job_id = _dead_export(s, "acme", "n-1")
        http = client(s.url(""), LOGIN)
        token = token_of(http.get(f"{mount}/jobs/{job_id}")[1])
        form = [("csrf", token), ("verb", "retry"), ("scope", "ids"), ("id", job_id)]
        for value in ("//evil.example/x", "javascript:alert(1)", "/\\evil.example"):
            status, _, page = http.post(f"{mount}/act", [*form, ("next", value)])
            assert status == 200
            assert f'href="{mount}/jobs"' in page
            assert "evil" not in page
            assert "javascript:" not in page
        status, headers, _ = http.post(
            f"{mount}/act", [*form, ("confirmed", "1"), ("next", "//evil.example/x")]
        )
        assert status == 303
        assert headers["location"].startswith(f"{mount}/?notice=")
        assert str(s.call(s.app.get_job(job_id)).state) == "ready"
