"""`xjobs backfills`: the declared sweeps, the ledger's runs, and `--pending` as a deploy gate, on every backend."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from xjobs_cli.backfills_cli import EXIT_PENDING
from xjobs_cli.load import load_app
from xjobs_cli.main import main

if TYPE_CHECKING:
    from conftest import Ops

# Two sweeps over an in-process table: one everywhere, one in production only that requires it.
FILLAPP = """
import os
from typing import Any

import xjobs
from xjobs.factories import Page, backfill

TABLE = {i: None for i in range(1, 8)}


async def fetch(cursor: Any, limit: int, tenant: str | None) -> Page[int]:
    after = cursor or 0
    ids = [i for i in sorted(TABLE) if i > after][:limit]
    return Page(ids, ids[-1] if len(ids) == limit else None)


async def handle(ids: list[int], tenant: str | None) -> None:
    for i in ids:
        TABLE[i] = i * 10


async def left(tenant: str | None) -> int:
    return sum(1 for v in TABLE.values() if v is None)


fill_totals = backfill(
    "fill_totals", fetch=fetch, handle=handle, count=left, batch=3,
    ledger=lambda: app.backend.backfills,
)
fill_names = backfill(
    "fill_names", fetch=fetch, handle=handle, batch=3, environments=["production"],
    requires=["fill_totals"], ledger=lambda: app.backend.backfills,
)
app = xjobs.App(os.environ["XJOBS_CLI_TEST_URL"], jobs=[fill_totals, fill_names])
"""


@dataclass
class Ran:
    """One `xjobs backfills` run: its exit code and what it printed."""

    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        return json.loads(self.out)


def _backfills(ops: Ops, *rest: str) -> Ran:
    ops.capsys.readouterr()
    code = main(["backfills", *rest])
    captured = ops.capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def _sweep(name: str) -> str:
    """Run the sweep `name` of fillapp through a worker until idle; answers its run's state."""
    app = load_app("fillapp:app")

    async def go() -> str:
        async with app:
            run = await app.enqueue(app.jobs[name], {})
            await app.run_worker(until_idle=True)
            return (await app.get_job(run.job_id)).state

    return asyncio.run(go())


def _deploy(ops: Ops, environment: str) -> bool:
    """A deploy script's gate: it goes on only when `xjobs backfills --pending` exits 0."""
    ran = _backfills(ops, "fillapp:app", "--pending", "--environment", environment)
    return ran.code == 0


def test_pending_gates_a_deploy_until_every_declared_sweep_completed_there(
    ops: Ops, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    monkeypatch.setenv("XJOBS_ENVIRONMENT", "production")

    first = _backfills(ops, "fillapp:app", "--pending", "--json")
    assert first.code == EXIT_PENDING, first.err
    assert first.doc["kind"] == "backfills.pending"
    assert [(p["name"], p["environment"]) for p in first.doc["pending"]] == [
        ("fill_names", "production"),
        ("fill_totals", "production"),
    ]
    assert not _deploy(ops, "production")

    assert _sweep("fill_totals") == "completed"
    assert _sweep("fill_names") == "completed"

    done = _backfills(ops, "fillapp:app", "--pending", "--json")
    assert (done.code, done.doc["pending"], done.doc["environments"]) == (0, [], ["production"])
    assert _deploy(ops, "production")
    # staging owes fill_totals (declared everywhere), never fill_names (production only)
    staging = _backfills(ops, "fillapp:app", "--pending", "--environment", "staging", "--json")
    assert staging.code == EXIT_PENDING
    assert [p["name"] for p in staging.doc["pending"]] == ["fill_totals"]


def test_the_listing_shows_declarations_and_runs_as_json_and_text(
    ops: Ops, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    monkeypatch.setenv("XJOBS_ENVIRONMENT", "ci")
    assert _sweep("fill_totals") == "completed"

    listed = _backfills(ops, "fillapp:app", "--json")
    assert listed.code == 0, listed.err
    doc = listed.doc
    assert doc["kind"] == "backfills"
    assert [d["name"] for d in doc["declared"]] == ["fill_names", "fill_totals"]
    ((run,),) = [doc["runs"]]
    assert (run["name"], run["status"], run["count"], run["batches"], run["environment"]) == (
        "fill_totals",
        "completed",
        7,
        3,
        "ci",
    )
    assert doc["pending"] == []  # fill_names is production only

    text = _backfills(ops, "fillapp:app")
    assert text.code == 0, text.err
    assert "fill_totals" in text.out
    assert "completed" in text.out
    assert "nothing pending in ci" in text.out


def test_pending_needs_the_apps_declarations(ops: Ops) -> None:
    refused = _backfills(ops, "--url", ops.url, "--pending", "--json")
    assert refused.code == 2
    assert json.loads(refused.err)["error"]["code"] == "XJOBS_TARGET_INVALID"


def test_a_bad_environment_is_refused(ops: Ops, app_dir: Path) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    refused = _backfills(ops, "fillapp:app", "--environment", "Not Valid", "--json")
    assert refused.code == 2
    assert json.loads(refused.err)["error"]["code"] == "XJOBS_BACKFILL_INVALID"
