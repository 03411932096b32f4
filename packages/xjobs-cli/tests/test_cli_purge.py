"""`xjobs purge`: one retention pass by hand, its dry run, and its JSON document, on every backend."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xjobs.contract.retention import PURGE_STORES
from xjobs_cli.main import main

if TYPE_CHECKING:
    from conftest import Ops

# An app over the test store whose finished jobs are kept 50 ms (the one under test here).
RETAPP = '''
import os
from datetime import timedelta

from pydantic import BaseModel

import xjobs
from xjobs.contract.retention import Retention


class Order(BaseModel):
    order_id: str


@xjobs.job(tenant="none", idempotency_key=lambda o: o.order_id, queue="billing")
async def receipt(ctx: xjobs.JobContext, input: Order) -> None:
    """Always completes."""


KEEP = timedelta(milliseconds=50)
app = xjobs.App(
    os.environ["XJOBS_CLI_TEST_URL"],
    jobs=[receipt],
    retention=Retention(completed=KEEP, cancelled=KEEP, failed=KEEP, dead=KEEP, queue="billing"),
)
'''


@dataclass
class Ran:
    """One `xjobs purge` run: its exit code and what it printed."""

    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        return json.loads(self.out)


def _purge(ops: Ops, *rest: str) -> Ran:
    ops.capsys.readouterr()
    code = main(["purge", *rest])
    captured = ops.capsys.readouterr()
    return Ran(code, captured.out, captured.err)


def test_purge_removes_what_is_past_the_apps_policy_and_the_dry_run_only_counts(
    ops: Ops, app_dir: Path
) -> None:
    (app_dir / "retapp.py").write_text(RETAPP)
    ops.enqueue("receipt", "r1", "r2", "r3")  # through opsapp (no retention): same store
    ops.work()
    time.sleep(0.1)

    dry = _purge(ops, "retapp:app", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    doc = dry.doc
    assert (doc["kind"], doc["dry_run"], doc["policy"]) == ("purge", True, "app")
    counts = {s["store"]: s["rows"] for s in doc["stores"]}
    assert list(counts) == list(PURGE_STORES)
    assert counts["jobs"] == 3

    done = _purge(ops, "retapp:app", "--json").doc
    assert {s["store"]: s["rows"] for s in done["stores"]}["jobs"] == 3
    assert done["dry_run"] is False
    assert done["total"] >= 3
    again = _purge(ops, "retapp:app", "--dry-run", "--json").doc
    assert {s["store"]: s["rows"] for s in again["stores"]}["jobs"] == 0


def test_purge_with_a_url_applies_the_default_policy(ops: Ops) -> None:
    ops.enqueue("receipt", "r1")
    ops.work()
    result = _purge(ops, "--url", ops.url, "--json")
    assert result.code == 0, result.err
    assert result.doc["policy"] == "default"
    assert {s["store"]: s["rows"] for s in result.doc["stores"]}["jobs"] == 0  # kept a day


def test_purge_prints_a_table_per_store(ops: Ops) -> None:
    result = _purge(ops, "--url", ops.url, "--dry-run")
    assert result.code == 0, result.err
    assert "would remove" in result.out
    assert "default retention policy" in result.out
    for store in PURGE_STORES:
        assert store in result.out
