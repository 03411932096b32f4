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


def _jobs(ops: Ops, *rest: str) -> Ran:
    ops.capsys.readouterr()
    code = main(["jobs", *rest])
    captured = ops.capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def test_a_runs_job_and_its_ledger_row_name_each_other(
    ops: Ops, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    monkeypatch.setenv("XJOBS_ENVIRONMENT", "ci")
    assert _sweep("fill_totals") == "completed"
    ((run,),) = [_backfills(ops, "fillapp:app", "--json").doc["runs"]]

    shown = _jobs(ops, "show", "fillapp:app", run["job_id"], "--json")
    assert shown.code == 0, shown.err
    backfill = shown.doc["backfill"]
    assert (backfill["run_id"], backfill["name"], backfill["count"], backfill["batches"]) == (
        run["run_id"],
        "fill_totals",
        7,
        3,
    )
    assert (
        f"backfill fill_totals: run {run['run_id']} [completed]"
        in _jobs(ops, "show", "fillapp:app", run["job_id"]).out
    )
    assert run["job_id"] in _backfills(ops, "fillapp:app").out


def test_jobs_list_by_backfill_lists_the_sweeps_runs(
    ops: Ops, app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    monkeypatch.setenv("XJOBS_ENVIRONMENT", "ci")
    assert _sweep("fill_totals") == "completed"
    ((run,),) = [_backfills(ops, "fillapp:app", "--json").doc["runs"]]

    listed = _jobs(ops, "list", "fillapp:app", "--backfill", "fill_totals", "--json")
    assert listed.code == 0, listed.err
    assert [j["id"] for j in listed.doc["jobs"]] == [run["job_id"]]
    assert listed.doc["where"]["name"] == "fill_totals"
    assert _jobs(ops, "list", "fillapp:app", "--backfill", "fill_names", "--json").doc["jobs"] == []


def test_jobs_list_refuses_a_backfill_the_app_does_not_declare(ops: Ops, app_dir: Path) -> None:
    (app_dir / "fillapp.py").write_text(FILLAPP)
    refused = _jobs(ops, "list", "fillapp:app", "--backfill", "fill_nothing", "--json")
    assert refused.code == 2
    assert _error_code(refused) == "XJOBS_USAGE"
    clash = _jobs(ops, "list", "fillapp:app", "--backfill", "fill_totals", "--name", "x", "--json")
    assert (clash.code, _error_code(clash)) == (2, "XJOBS_USAGE")


def _error_code(ran: Ran) -> str:
    code: str = json.loads(ran.err.strip().splitlines()[-1])["error"]["code"]
    return code


def test_a_job_that_runs_no_sweep_shows_no_backfill(ops: Ops) -> None:
    (job_id,) = ops.enqueue("charge", "o-1")
    shown = ops.cli("jobs show", job_id)
    assert shown.code == 0, shown.err
    assert shown.doc["backfill"] is None
