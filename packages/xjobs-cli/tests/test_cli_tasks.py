"""`xjobs tasks list|pause|resume|trigger`: the app's cron tasks, which `--url` cannot see."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Ops


def test_tasks_list_shows_each_task_with_its_schedule(ops: Ops) -> None:
    result = ops.cli("tasks list")

    assert result.code == 0
    doc = result.doc
    assert (doc["version"], doc["kind"]) == (1, "tasks.list")
    (task,) = doc["tasks"]
    assert {k: task[k] for k in ("name", "job", "cron", "tz", "last_fire", "paused")} == {
        "name": "nightly",
        "job": "receipt",
        "cron": "0 3 * * *",
        "tz": "Europe/Paris",
        "last_fire": None,
        "paused": False,
    }
    assert task["next_ms"] > doc["now_ms"]


def test_tasks_list_as_a_table(memory_ops: Ops) -> None:
    out = memory_ops.cli("tasks list", json=False).out.splitlines()

    assert out[0].split() == ["TASK", "JOB", "CRON", "TZ", "NEXT", "LAST", "FIRE", "PAUSED"]
    assert out[1].split()[:2] == ["nightly", "receipt"]


def test_pause_and_resume_a_task(ops: Ops) -> None:
    paused = ops.cli("tasks pause", "nightly")
    listed = ops.cli("tasks list").doc
    again = ops.cli("tasks pause", "nightly", json=False)
    resumed = ops.cli("tasks resume", "nightly")

    assert paused.doc == {"version": 1, "kind": "tasks.pause", "task": "nightly", "changed": True}
    assert listed["tasks"][0]["paused"] is True
    assert again.out == "task nightly was already paused\n"
    assert resumed.doc["changed"] is True


def test_trigger_enqueues_the_tasks_job_now(ops: Ops) -> None:
    result = ops.cli("tasks trigger", "nightly")

    assert result.code == 0
    doc = result.doc
    assert (doc["kind"], doc["task"], doc["job"], doc["deduped"]) == (
        "tasks.trigger",
        "nightly",
        "receipt",
        False,
    )
    shown = ops.cli("jobs show", doc["job_id"]).doc
    assert (shown["job"]["name"], shown["job"]["state"]) == ("receipt", "ready")
    assert ops.cli("tasks trigger", "nightly").doc["deduped"] is True


def test_an_unknown_task_is_refused(memory_ops: Ops) -> None:
    result = memory_ops.cli("tasks pause", "weekly")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_TASK_NOT_REGISTERED"
    assert "known: nightly" in result.error["message"]


def test_tasks_through_url_are_refused_they_live_in_the_app(ops: Ops) -> None:
    result = ops.cli("tasks list", url=True)

    assert (result.code, result.out) == (2, "")
    assert result.error["code"] == "XJOBS_TARGET_INVALID"
    assert "MODULE:APP" in result.error["message"]
