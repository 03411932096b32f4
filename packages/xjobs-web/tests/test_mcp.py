"""`xjobs mcp`: a real MCP client session (the SDK's stdio client) against the command run as a
subprocess over Postgres and Redis: the read tools answer from the operator surface with what jobs
wrote under `untrusted_data`, the moving tools exist only with --allow-actions and act only when a
preview's one-time token confirms them, --tenant scopes every tool, and what they move is what the
backend then holds."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

import xjobs

if TYPE_CHECKING:
    from conftest import Seeded

HERE = Path(__file__).parent
READS = {
    "list_jobs",
    "show_job",
    "list_queues",
    "list_workers",
    "list_tasks",
    "list_backfills",
    "failures",
    "stats",
}
UNTRUSTED = "untrusted_data"


@asynccontextmanager
async def session(url: str, *target: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with `xjobs mcp TARGET…` (the test app, from this folder)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "xjobs_cli", "mcp", *target],
        env={"XJOBS_WEB_TEST_URL": url},
        cwd=str(HERE),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def confirmed(client: ClientSession, tool: str, **arguments: Any) -> Any:
    """A moving tool's two calls: the preview, then the same arguments with its token."""
    preview = await call(client, tool, **arguments)
    assert preview["done"] is False
    return await call(client, tool, **arguments, confirm=preview["confirm"])


def _text(result: Any) -> str:
    return json.dumps([c.model_dump() for c in result.content])


async def _tools(client: ClientSession) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


@pytest.mark.asyncio
async def test_an_assistant_finds_why_the_export_failed_read_only(seeded: Seeded) -> None:
    async with session(seeded.url, "webapp:app") as client:
        assert await _tools(client) == READS

        dead = await call(client, "list_jobs", state=["dead"], name="export")
        assert (dead["version"], dead["kind"]) == (1, "jobs.list")
        assert [j["id"] for j in dead["jobs"]] == [seeded.dead_id]

        shown = await call(client, "show_job", job_id=seeded.dead_id)
        assert shown["job"]["state"] == "dead"
        assert shown["redaction"] == "applied"
        redacted = {"org": "acme", "report": "nightly-export", "token": "****"}
        assert shown[UNTRUSTED]["input"] == redacted
        (error,) = shown["errors"]
        assert (error["error_class"], error[UNTRUSTED]["message"]) == (
            "TimeoutError",
            "the warehouse did not answer within 30s",
        )
        assert "raise TimeoutError" in error[UNTRUSTED]["traceback"]
        assert [s["name"] for s in shown["steps"]] == ["gather", "cool-down"]

        groups = (await call(client, "failures"))["groups"]
        assert [(g["error_class"], g["count"], g["names"]) for g in groups] == [
            ("TimeoutError", 1, ["export"])
        ]
        queues = {q["queue"]: q for q in (await call(client, "list_queues"))["queues"]}
        assert (queues["reports"]["dead"], queues["mail"]["dead"]) == (1, 0)
        stats = await call(client, "stats", since="1h")
        by_name = {r["key"]: r["outcomes"] for r in stats["rows"]}
        assert by_name["export"]["dead-lettered"] == 1
        assert by_name["send_mail"]["completed"] == 1
        tasks = (await call(client, "list_tasks"))["tasks"]
        assert [t["name"] for t in tasks] == ["nightly"]
        assert (await call(client, "list_workers"))["workers"] == []

        # a moving tool is not there to call; a bad argument is a coded tool error
        refused = await client.call_tool("move", {"verb": "retry", "job_ids": [seeded.dead_id]})
        assert refused.is_error
        bad = await client.call_tool("list_jobs", {"state": ["lost"]})
        assert bad.is_error
        assert "XJOBS_FILTER_INVALID" in json.dumps([c.model_dump() for c in bad.content])

    async with xjobs.App(seeded.url) as app:
        assert (await app.get_job(seeded.dead_id)).state == "dead"


@pytest.mark.asyncio
async def test_allow_actions_adds_the_moving_tools_and_they_move(seeded: Seeded) -> None:
    async with session(seeded.url, "--url", seeded.url, "--allow-actions") as client:
        assert await _tools(client) == READS | {"move", "pause"}
        # --url: no declarations, so the input is as stored and no task is known
        shown = await call(client, "show_job", job_id=seeded.dead_id)
        assert shown["redaction"] == "unavailable"
        assert "input" in shown[UNTRUSTED]
        assert (await call(client, "list_tasks"))["tasks"] == []

        ids = [seeded.dead_id, "no-such-id"]
        moved = await confirmed(client, "move", verb="retry", job_ids=ids)
        assert moved["moved"] == 1
        assert list(moved["refused"]) == ["no-such-id"]
        assert (await confirmed(client, "pause", kind="queue", name="reports"))["changed"] is True

    async with xjobs.App(seeded.url) as app:
        assert (await app.get_job(seeded.dead_id)).state == "ready"
        assert {q.queue: q.paused for q in await app.operator.queues()}["reports"] is True


@pytest.mark.asyncio
async def test_a_move_acts_only_on_the_second_call_with_its_one_time_token(
    seeded: Seeded,
) -> None:
    async with session(seeded.url, "webapp:app", "--allow-actions") as client:
        tools = (await client.list_tools()).tools
        move_tool = next(t for t in tools if t.name == "move")
        assert "confirm" in (move_tool.description or "")
        preview = await call(client, "move", verb="remove", job_ids=[seeded.dead_id])
        assert preview["done"] is False
        assert preview["preview"]["jobs"] == [
            {
                "id": seeded.dead_id,
                "name": "export",
                "queue": "reports",
                "state": "dead",
                "movable": True,
            }
        ]
        token = preview["confirm"]
        # a token confirms only the call it was issued for, and it is spent by any use
        other = await client.call_tool(
            "move", {"verb": "cancel", "job_ids": [seeded.dead_id], "confirm": token}
        )
        assert other.is_error
        assert "XJOBS_CONFIRMATION_INVALID" in _text(other)
        spent = await client.call_tool(
            "move", {"verb": "remove", "job_ids": [seeded.dead_id], "confirm": token}
        )
        assert "XJOBS_CONFIRMATION_INVALID" in _text(spent)
        forged = await client.call_tool(
            "pause", {"kind": "queue", "name": "reports", "confirm": "made-up"}
        )
        assert "XJOBS_CONFIRMATION_INVALID" in _text(forged)
        pause_preview = await call(client, "pause", kind="queue", name="reports")
        assert pause_preview["preview"]["paused_now"] is False

    async with xjobs.App(seeded.url) as app:
        assert (await app.get_job(seeded.dead_id)).state == "dead"
        assert not any(q.paused for q in await app.operator.queues())


@pytest.mark.asyncio
async def test_what_a_job_wrote_reaches_the_assistant_only_under_untrusted_data(
    seeded: Seeded,
) -> None:
    async with session(seeded.url, "webapp:app") as client:
        tools = {t.name: t.description or "" for t in (await client.list_tools()).tools}
        assert all(UNTRUSTED in tools[name] for name in READS)
        listed = await call(client, "list_jobs", state=["dead"])
        (job,) = listed["jobs"]
        assert "last_error" not in job
        assert "tenant" not in job
        assert job[UNTRUSTED]["last_error"].startswith("TimeoutError: the warehouse")
        shown = await call(client, "show_job", job_id=seeded.dead_id)
        assert "input" not in shown
        assert "idempotency_key" not in shown["job"]
        assert "idempotency_key" in shown["job"][UNTRUSTED]
        (group,) = (await call(client, "failures"))["groups"]
        assert group[UNTRUSTED]["message"] == "the warehouse did not answer within 30s"
        assert "message" not in group


@pytest.mark.asyncio
async def test_a_tenant_scoped_server_sees_and_moves_only_that_tenants_jobs(
    seeded: Seeded,
) -> None:
    async with session(seeded.url, "webapp:app", "--tenant", "globex", "--allow-actions") as c:
        assert (await call(c, "list_jobs"))["jobs"] == []
        assert (await call(c, "list_queues"))["queues"] == []
        assert (await call(c, "failures"))["groups"] == []
        hidden = await c.call_tool("show_job", {"job_id": seeded.dead_id})
        assert "XJOBS_JOB_NOT_FOUND" in _text(hidden)
        preview = await call(c, "move", verb="retry", job_ids=[seeded.dead_id])
        assert preview["preview"]["jobs"] == [
            {"id": seeded.dead_id, "refused": "XJOBS_JOB_NOT_FOUND"}
        ]
        moved = await call(
            c, "move", verb="retry", job_ids=[seeded.dead_id], confirm=preview["confirm"]
        )
        assert moved["moved"] == 0
        assert moved["refused"][seeded.dead_id].startswith("XJOBS_JOB_NOT_FOUND")
        for tool, arguments in (
            ("stats", {}),
            ("pause", {"kind": "queue", "name": "reports"}),
        ):
            refused = await c.call_tool(tool, arguments)
            assert "XJOBS_TENANT_SCOPE_SHARED" in _text(refused)
    async with session(seeded.url, "webapp:app", "--tenant", "acme") as client:
        (job,) = (await call(client, "list_jobs", state=["dead"]))["jobs"]
        assert job["id"] == seeded.dead_id

    async with xjobs.App(seeded.url) as app:
        assert (await app.get_job(seeded.dead_id)).state == "dead"
