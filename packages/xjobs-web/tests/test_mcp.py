"""`xjobs mcp`: a real MCP client session (the SDK's stdio client) against the command run as a
subprocess over Postgres and Redis: the read tools answer from the operator surface, the moving
tools exist only with --allow-actions, and what they move is what the backend then holds."""

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
READS = {"list_jobs", "show_job", "list_queues", "list_workers", "list_tasks", "failures", "stats"}


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
        assert shown["input"] == {"org": "acme", "report": "nightly-export", "token": "****"}
        (error,) = shown["errors"]
        assert (error["error_class"], error["message"]) == (
            "TimeoutError",
            "the warehouse did not answer within 30s",
        )
        assert "raise TimeoutError" in error["traceback"]
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
        assert shown["input"]["token"] == "s3cret-warehouse-token"
        assert (await call(client, "list_tasks"))["tasks"] == []

        moved = await call(client, "move", verb="retry", job_ids=[seeded.dead_id, "no-such-id"])
        assert moved["moved"] == 1
        assert list(moved["refused"]) == ["no-such-id"]
        assert (await call(client, "pause", kind="queue", name="reports"))["changed"] is True

    async with xjobs.App(seeded.url) as app:
        assert (await app.get_job(seeded.dead_id)).state == "ready"
        assert {q.queue: q.paused for q in await app.operator.queues()}["reports"] is True
