"""`xjobs jobs cancel|retry|promote|remove`: ids each reported; a filter counted, then moved in batches."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from xjobs.operate.verbs import VERBS
from xjobs_cli import moves_cli

if TYPE_CHECKING:
    from conftest import Ops

UNKNOWN = "01900000-0000-7000-8000-000000000000"


def _states(ops: Ops, *ids: str) -> list[str]:
    return [ops.cli("jobs show", job_id).doc["job"]["state"] for job_id in ids]


# -- on ids -----------------------------------------------------------------------------------------


def test_cancel_of_several_ids_reports_each_and_exits_2_after_doing_the_others(ops: Ops) -> None:
    first, second = ops.enqueue("receipt", "r1", "r2")

    result = ops.cli("jobs cancel", first, UNKNOWN, second)

    assert result.code == 2
    doc = result.doc
    assert (doc["version"], doc["kind"], doc["refused"]) == (1, "jobs.cancel", 1)
    assert [(r["id"], r["ok"]) for r in doc["results"]] == [
        (first, True),
        (UNKNOWN, False),
        (second, True),
    ]
    assert doc["results"][0]["state"] == "cancelled"
    assert doc["results"][1]["error"]["code"] == "XJOBS_JOB_NOT_FOUND"
    assert result.error["code"] == "XJOBS_JOB_NOT_FOUND"
    assert _states(ops, first, second) == ["cancelled", "cancelled"]


def test_ids_without_json_print_each_move_and_each_refusal_on_stderr(memory_ops: Ops) -> None:
    (done,) = memory_ops.dead("c1")

    result = memory_ops.cli("jobs retry", done, UNKNOWN, json=False)

    assert result.code == 2
    assert result.out.splitlines() == [f"retried {done} (charge): now ready", "1 of 2 retried"]
    assert result.err == f"error: XJOBS_JOB_NOT_FOUND: {UNKNOWN}: no job has id '{UNKNOWN}'\n"


def test_retry_of_a_live_job_is_refused_with_its_code(ops: Ops) -> None:
    (job_id,) = ops.enqueue("receipt", "r1")

    result = ops.cli("jobs retry", job_id)

    assert result.code == 2
    assert result.doc["results"][0]["error"]["code"] == "XJOBS_JOB_NOT_REQUEUEABLE"


def test_promote_makes_a_delayed_job_due_now(ops: Ops) -> None:
    (job_id,) = ops.enqueue("receipt", "later", delay=timedelta(hours=1))

    result = ops.cli("jobs promote", job_id)

    assert result.code == 0
    assert result.doc["results"] == [
        {"id": job_id, "ok": True, "name": "receipt", "state": "ready"}
    ]
    assert ops.work().completed == 1


def test_remove_deletes_a_finished_job_and_refuses_a_live_one(ops: Ops) -> None:
    (dead,) = ops.dead("c1")
    (live,) = ops.enqueue("receipt", "r1")

    result = ops.cli("jobs remove", dead, live)

    assert result.code == 2
    ok, refused = result.doc["results"]
    assert (ok["id"], ok["state"]) == (dead, "removed")
    assert refused["error"]["code"] == "XJOBS_JOB_NOT_REMOVABLE"
    assert ops.cli("jobs show", dead).error["code"] == "XJOBS_JOB_NOT_FOUND"


# -- on a filter ------------------------------------------------------------------------------------


def test_a_filter_without_yes_counts_and_changes_nothing(ops: Ops) -> None:
    dead = ops.dead("c1", "c2", "c3")

    result = ops.cli("jobs retry", "--where-state", "dead", "--name", "charge")
    text = ops.cli("jobs retry", "--where-state", "dead", json=False)

    assert result.code == 0
    doc = result.doc
    assert (doc["kind"], doc["dry_run"], doc["matched"], doc["matched_at_least"]) == (
        "jobs.retry",
        True,
        3,
        False,
    )
    assert doc["where"]["states"] == ["dead"]
    assert doc["where"]["name"] == "charge"
    assert text.out == "3 jobs match (state dead); nothing was changed: add --yes to retry them\n"
    assert _states(ops, *dead) == ["dead"] * 3


def test_retry_where_dead_with_yes_then_a_worker_completes_them(ops: Ops) -> None:
    dead = ops.dead("c1", "c2", "c3")
    ops.enqueue("receipt", "r1")

    result = ops.cli("jobs retry", "--where-state", "dead", "--name", "charge", "--yes")

    assert result.code == 0
    doc = result.doc
    assert (doc["dry_run"], doc["moved"], doc["remaining"], doc["batches"]) == (False, 3, 0, 1)
    assert _states(ops, *dead) == ["ready"] * 3
    assert ops.work().completed == 4
    assert _states(ops, *dead) == ["completed"] * 3


def test_with_yes_and_without_json_each_batch_shows_on_stderr(memory_ops: Ops) -> None:
    memory_ops.dead("c1", "c2")

    result = memory_ops.cli("jobs remove", "--where-state", "dead", "--yes", json=False)

    assert result.code == 0
    assert result.err == "remove: batch 1 moved 2 (2 in all, 0 remaining)\n"
    assert result.out == "removed 2 jobs (state dead) in 1 batches; 0 remaining\n"


def test_a_limit_moves_one_batch_and_reports_what_remains(ops: Ops) -> None:
    ops.enqueue("receipt", "r1", "r2", "r3")

    result = ops.cli("jobs cancel", "--where-state", "ready", "--limit", "2", "--yes")

    assert result.code == 0
    assert (result.doc["moved"], result.doc["remaining"], result.doc["batches"]) == (2, 1, 1)


def test_without_a_limit_batches_run_until_nothing_remains(
    memory_ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(moves_cli, "MAX_BULK_BATCH", 2)
    memory_ops.enqueue("receipt", "r1", "r2", "r3", "r4", "r5")

    result = memory_ops.cli("jobs cancel", "--where-state", "ready", "--yes")

    assert (result.doc["moved"], result.doc["remaining"], result.doc["batches"]) == (5, 0, 3)
    assert memory_ops.cli("jobs list", "--state", "ready").doc["jobs"] == []


def test_promote_where_counts_only_delayed_jobs(ops: Ops) -> None:
    ops.enqueue("receipt", "now")
    ops.enqueue("receipt", "later1", "later2", delay=timedelta(hours=1))

    counted = ops.cli("jobs promote", "--where-state", "ready").doc
    moved = ops.cli("jobs promote", "--where-state", "ready", "--yes").doc

    assert counted["matched"] == 2
    assert moved["moved"] == 2


def test_a_state_the_verb_never_moves_is_refused(ops: Ops) -> None:
    result = ops.cli("jobs cancel", "--where-state", "dead")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_FILTER_INVALID"
    assert "cancel moves only ready, running, waiting jobs" in result.error["message"]


@pytest.mark.parametrize(
    ("rest", "code"),
    [
        (["--where-state", "lost"], "XJOBS_FILTER_INVALID"),
        (["--where-state", ","], "XJOBS_USAGE"),
        (["--where-state", "dead", "--limit", "0", "--yes"], "XJOBS_FILTER_INVALID"),
        (["--where-state", "dead", "--limit", "1001", "--yes"], "XJOBS_FILTER_INVALID"),
        ([UNKNOWN, "--where-state", "dead"], "XJOBS_USAGE"),
        ([UNKNOWN, "--name", "charge"], "XJOBS_USAGE"),
        ([], "XJOBS_USAGE"),
    ],
)
def test_a_malformed_move_is_refused_before_it_moves_anything(
    memory_ops: Ops, rest: list[str], code: str
) -> None:
    (dead,) = memory_ops.dead("c1")

    result = memory_ops.cli("jobs retry", *rest)

    assert (result.code, result.out) == (2, "")
    assert result.error["code"] == code
    assert _states(memory_ops, dead) == ["dead"]


def test_each_verb_moves_the_states_core_says_it_does() -> None:
    from xjobs.contract.driver import FINISHED_STATES, LIVE_STATES

    states = {verb.name: set(verb.states) for verb in VERBS}
    assert states == {
        "cancel": set(LIVE_STATES),
        "retry": set(FINISHED_STATES),
        "promote": {"ready"},
        "remove": set(FINISHED_STATES),
    }
