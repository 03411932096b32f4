"""Secrets an operator command never prints: a job's redacted key and step results, a URL's
password; `$XJOBS_URL` keeps the password off the command line; telemetry binds loopback."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from xjobs_cli.load import load_app
from xjobs_cli.main import build_parser, main

if TYPE_CHECKING:
    from conftest import Ops

SECRET = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
VAULT_APP = f'''
import os

from pydantic import BaseModel

import xjobs
from xjobs.declare.job import Redact


class Grant(BaseModel):
    user: str
    token: str = "{SECRET}"


def _hide_step(name, value):
    return {{"user": value["user"], "token": "***"}}


@xjobs.job(
    tenant="none",
    idempotency_key=lambda g: f"{{g.user}}:{{g.token}}",
    redact=Redact(
        input=lambda g: {{"user": g.user}},
        key=lambda k: k.split(":")[0] + ":***",
        steps=_hide_step,
    ),
)
async def grant(ctx: xjobs.JobContext, input: Grant) -> None:
    await ctx.step.run("mint", lambda: {{"user": input.user, "token": input.token}})


app = xjobs.App(os.environ["XJOBS_CLI_TEST_URL"], jobs=[grant])
'''


def _granted(ops: Ops, app_dir: Path) -> str:
    """One `grant` job run to completion through `vaultapp:app`; its id."""
    (app_dir / "vaultapp.py").write_text(VAULT_APP)
    app = load_app("vaultapp:app")
    module: Any = sys.modules["vaultapp"]

    async def go(opened: Any) -> str:
        result = await module.grant.enqueue(module.Grant(user="ada"))
        await opened.run_worker(until_idle=True)
        job_id: str = result.job_id
        return job_id

    async def run() -> str:
        async with app as opened:
            return await go(opened)

    return asyncio.run(run())


def _show(ops: Ops, *argv: str) -> tuple[int, str, str]:
    ops.capsys.readouterr()
    code = main(["jobs", "show", *argv])
    captured = ops.capsys.readouterr()
    return code, captured.out, captured.err


def test_jobs_show_prints_the_key_and_step_results_through_redact(ops: Ops, app_dir: Path) -> None:
    job_id = _granted(ops, app_dir)

    code, out, err = _show(ops, "vaultapp:app", job_id, "--json")
    _, text, _ = _show(ops, "vaultapp:app", job_id)

    assert code == 0, err
    doc = json.loads(out)
    assert doc["redaction"] == "applied"
    assert doc["input"] == {"user": "ada"}
    assert doc["job"]["idempotency_key"] == "ada:***"
    assert [s["result"] for s in doc["steps"]] == [{"user": "ada", "token": "***"}]
    assert SECRET not in out + text


def test_jobs_show_of_a_job_the_app_does_not_declare_withholds_it(ops: Ops, app_dir: Path) -> None:
    job_id = _granted(ops, app_dir)

    code, out, err = _show(ops, "opsapp:app", job_id, "--json")  # opsapp declares no `grant`

    assert code == 0, err
    doc = json.loads(out)
    assert doc["redaction"] == "unknown-job"
    assert doc["input"] == "<withheld: this process declares no job named 'grant'>"
    assert SECRET not in out


def test_an_operator_verb_opens_the_url_in_xjobs_url(
    memory_ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_ops.enqueue("receipt", "r1")
    monkeypatch.setenv("XJOBS_URL", memory_ops.url)

    memory_ops.capsys.readouterr()
    code = main(["jobs", "list", "--json"])
    doc = json.loads(memory_ops.capsys.readouterr().out)

    assert code == 0
    assert [j["name"] for j in doc["jobs"]] == ["receipt"]


def test_a_named_app_wins_over_xjobs_url(memory_ops: Ops, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XJOBS_URL", "nosuchdb://nowhere")

    result = memory_ops.cli("jobs list")

    assert result.code == 0, result.err


@pytest.mark.parametrize("role", ["worker", "scheduler", "relay"])
def test_the_telemetry_ports_bind_loopback_unless_a_host_is_named(role: str) -> None:
    parser = build_parser()
    assert parser.parse_args([role, "opsapp:app"]).telemetry_host == "127.0.0.1"
    opened = parser.parse_args([role, "opsapp:app", "--telemetry-host", "0.0.0.0"])
    assert opened.telemetry_host == "0.0.0.0"
