"""The seed's tenancy rule across the three surfaces: on every backend, an operator of one tenant
who names another tenant's job gets the same verdict from the dashboard (HTTP), the MCP server and
`app.operator.for_tenant` (Python) for every verb, and the job is left as it was."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from mcp import Client
from starlette.requests import Request

from xjobs import App, JobFilter, XJobsError
from xjobs_web import basic_auth
from xjobs_web.mcp_server import mcp_server

if TYPE_CHECKING:
    from conftest import Http, Serve, Served

OURS, THEIRS = "globex", "acme"
VERBS = ("get", "cancel", "retry", "promote", "remove")
BULK = ("cancel", "retry", "promote", "remove")
CODE = re.compile(r"XJOBS_[A-Z_]+")
LOGIN = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}


def _org(request: Request) -> str | None:
    return request.headers.get("x-org")


def _code(text: str) -> str:
    found = CODE.search(text)
    return found.group(0) if found else "no code"


def _seed(s: Served) -> dict[str, str]:
    """Their job in the state each verb moves (get reads the dead one); one job of our own."""
    m = s.module
    m.FAILING.add("x-dead")
    dead = s.as_org(THEIRS, m.export.enqueue(m.Export(org=THEIRS, report="x-dead"))).job_id
    ours = s.as_org(OURS, m.export.enqueue(m.Export(org=OURS, report="x-ours"))).job_id
    s.work()
    m.FAILING.clear()
    ready = s.as_org(THEIRS, m.export.enqueue(m.Export(org=THEIRS, report="x-ready"))).job_id
    later = m.export.enqueue(m.Export(org=THEIRS, report="x-later"), delay=timedelta(hours=1))
    delayed = s.as_org(THEIRS, later).job_id
    targets = {"get": dead, "cancel": ready, "retry": dead, "promote": delayed, "remove": dead}
    return {**{verb: str(job_id) for verb, job_id in targets.items()}, "ours": str(ours)}


def _http(http: Http, token: str, verb: str, job_id: str) -> str:
    if verb == "get":
        status, body = http.get(f"/jobs/{job_id}")
        return "shown" if status == 200 else _code(body)
    form = [("csrf", token), ("verb", verb), ("scope", "ids"), ("id", job_id), ("confirmed", "1")]
    status, _, body = http.post("/act", form)
    return "moved" if status == 303 else _code(body)


def _http_bulk(http: Http, token: str, verb: str) -> int:
    form = [("csrf", token), ("verb", verb), ("scope", "filter"), ("tenant", THEIRS)]
    status, headers, _ = http.post("/act", [*form, ("confirmed", "1"), ("next", "/jobs")])
    assert status == 303
    moved = re.search(r"notice=[a-z]+\+(\d+)", headers["location"])
    assert moved is not None, headers["location"]
    return int(moved.group(1))


async def _mcp(app: App, targets: dict[str, str]) -> dict[str, str]:
    verdicts: dict[str, str] = {}
    async with Client(mcp_server(app, allow_actions=True, tenant=OURS)) as client:
        for verb in VERBS:
            job_id = targets[verb]
            if verb == "get":
                shown = await client.call_tool("show_job", {"job_id": job_id})
                verdicts[verb] = "shown" if not shown.is_error else _code(str(shown.content))
                continue
            arguments: dict[str, Any] = {"verb": verb, "job_ids": [job_id]}
            preview = await client.call_tool("move", arguments)
            token = (preview.structured_content or {})["confirm"]
            moved = await client.call_tool("move", {**arguments, "confirm": token})
            answer = moved.structured_content or {}
            verdicts[verb] = "moved" if answer["moved"] else _code(answer["refused"][job_id])
        listed = await client.call_tool("list_jobs", {"tenant": THEIRS})
        verdicts["list"] = str(len((listed.structured_content or {})["jobs"]))
    return verdicts


async def _python(app: App, targets: dict[str, str]) -> dict[str, str]:
    op = app.operator.for_tenant(OURS)
    calls: dict[str, Callable[[str], Any]] = {
        "get": op.get_job,
        "cancel": op.cancel,
        "retry": op.retry,
        "promote": op.promote,
        "remove": op.remove,
    }
    verdicts: dict[str, str] = {}
    for verb in VERBS:
        try:
            await calls[verb](targets[verb])
        except XJobsError as exc:
            verdicts[verb] = exc.code
        else:
            verdicts[verb] = "shown" if verb == "get" else "moved"
    listed = await op.list_jobs(JobFilter(tenant=THEIRS))
    verdicts["list"] = str(len(listed.jobs))
    return verdicts


async def _python_bulk(app: App, verb: str) -> int:
    op = app.operator.for_tenant(OURS)
    where = JobFilter(tenant=THEIRS)
    moves = {
        "cancel": op.cancel_where,
        "retry": op.retry_where,
        "promote": op.promote_where,
        "remove": op.remove_where,
    }
    return (await moves[verb](where)).moved


@pytest.mark.parametrize("kind", ["memory", "postgres", "redis"])
def test_http_mcp_and_python_agree_on_every_verb_on_another_tenants_job(
    serve: Serve, client: type[Http], token_of: Callable[[str], str], kind: str
) -> None:
    with serve(kind, auth=basic_auth("ops", "pw"), tenant=_org) as s:
        targets = _seed(s)
        theirs = sorted({targets[verb] for verb in VERBS})
        before = [s.call(s.app.get_job(job_id)) for job_id in theirs]
        http = client(s.url(""), {**LOGIN, "X-Org": OURS})
        status, page = http.get(f"/jobs/{targets['ours']}")
        assert status == 200
        token = token_of(page)

        by_http = {verb: _http(http, token, verb, targets[verb]) for verb in VERBS}
        status, listing = http.get(f"/jobs?tenant={THEIRS}")
        assert status == 200
        by_http["list"] = str(sum(job_id in listing for job_id in theirs))
        by_mcp = s.call(_mcp(s.app, targets))
        by_python = s.call(_python(s.app, targets))
        bulk_http = {verb: _http_bulk(http, token, verb) for verb in BULK}
        bulk_python = {verb: s.call(_python_bulk(s.app, verb)) for verb in BULK}

        expected = {verb: "XJOBS_JOB_NOT_FOUND" for verb in VERBS} | {"list": "0"}
        assert by_http == by_mcp == by_python == expected
        assert bulk_http == bulk_python == dict.fromkeys(BULK, 0)
        assert [s.call(s.app.get_job(job_id)) for job_id in theirs] == before
