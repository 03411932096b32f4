"""The backfills page: the ledger's runs (name, state, cursor, rows, batches), each linked to the
job it is, tenant-scoped as every other page; a job's page names the run it is."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

import pytest
from starlette.requests import Request

from xjobs.contract.backfills import BackfillStart
from xjobs.ids import new_id
from xjobs_web import basic_auth

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

LOGIN = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
AUTH = basic_auth("ops", "pw")


def _org(request: Request) -> str | None:
    return request.headers.get("x-org")


def _run(s: Served, org: str | None, report: str, cursor: str | None = None) -> tuple[str, str]:
    """A run of the sweep "export" for `org` (None: every tenant) whose job is an export job;
    checkpointed at `cursor` after two batches. Its run id and job id."""
    m = s.module
    job_id = str(s.as_org(org, m.export.enqueue(m.Export(org=org or "x", report=report))).job_id)
    ledger = s.app.backend.backfills
    assert ledger is not None
    run_id = new_id()
    s.call(ledger.begin(BackfillStart(run_id, job_id, "export", "c1", "test", org)))
    if cursor is not None:
        assert s.call(ledger.checkpoint(run_id, cursor, 40, 2))
    return run_id, job_id


@pytest.mark.parametrize("kind", ["memory", "postgres", "redis"])
def test_the_page_lists_each_run_with_its_cursor_and_its_job(
    kind: str, serve: Serve, client: type[Http]
) -> None:
    with serve(kind, auth=AUTH) as s:
        run_id, job_id = _run(s, "acme", "b-1", cursor='{"after": 40}')

        status, page = client(s.url(""), LOGIN).get("/backfills")
        assert status == 200
        row = page.split(f'data-run="{run_id}"', 1)[1].split("</tr>", 1)[0]
        assert "running" in row
        assert "{&#34;after&#34;: 40}" in row  # the cursor, escaped
        assert '<td class="n">40</td><td class="n">2</td>' in row
        assert f'href="/jobs/{job_id}"' in row
        assert 'href="/backfills"' in page  # in the navigation

        status, job_page = client(s.url(""), LOGIN).get(f"/jobs/{job_id}")
        assert status == 200
        shown = job_page.split('data-testid="job-backfill"', 1)[1].split("</dd>", 1)[0]
        assert 'href="/backfills?name=export"' in shown
        assert "40 rows in 2 batches" in shown


def test_the_page_narrows_to_one_sweep_by_name(serve: Serve, client: type[Http]) -> None:
    with serve("memory", auth=AUTH) as s:
        run_id, _ = _run(s, "acme", "n-1")
        status, page = client(s.url(""), LOGIN).get("/backfills?name=export")
        assert status == 200
        assert run_id in page
        status, other = client(s.url(""), LOGIN).get("/backfills?name=elsewhere")
        assert status == 200
        assert run_id not in other
        assert "no backfill has run under this name" in other


def test_a_tenant_sees_only_its_own_tenants_runs(serve: Serve, client: type[Http]) -> None:
    with serve("memory", auth=AUTH, tenant=_org) as s:
        ours, _ = _run(s, "acme", "t-1")
        theirs, their_job = _run(s, "globex", "t-2")
        everyone, _ = _run(s, None, "t-3")

        status, page = client(s.url(""), {**LOGIN, "X-Org": "acme"}).get("/backfills")
        assert status == 200
        assert ours in page
        assert theirs not in page
        assert everyone not in page
        assert their_job not in page


def test_a_visit_without_login_is_refused(serve: Serve, client: type[Http]) -> None:
    with serve("memory", auth=AUTH) as s:
        _run(s, "acme", "a-1")
        status, _ = client(s.url("")).get("/backfills")
        assert status == 401
