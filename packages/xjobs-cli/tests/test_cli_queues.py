"""`xjobs queues list|pause|resume` and `xjobs jobs pause|resume --name`: a pause is a row the claim reads."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from xjobs.contract.introspection import COUNT_CAP, HOUR_MS
from xjobs.operate.counter_sums import Window
from xjobs_cli import queues_cli

if TYPE_CHECKING:
    from conftest import Ops


def test_queues_list_counts_each_state_with_the_oldest_ready_age(ops: Ops) -> None:
    ops.dead("c1")
    ops.enqueue("charge", "c2")
    ops.enqueue("charge", "c3", delay=timedelta(hours=1))
    time.sleep(0.05)

    result = ops.cli("queues list")

    assert result.code == 0
    doc = result.doc
    assert (doc["version"], doc["kind"], doc["count_cap"]) == (1, "queues.list", COUNT_CAP)
    (billing,) = doc["queues"]
    counts = {k: billing[k] for k in ("ready", "scheduled", "running", "waiting", "dead", "failed")}
    assert counts == {
        "ready": 1,
        "scheduled": 1,
        "running": 0,
        "waiting": 0,
        "dead": 1,
        "failed": 0,
    }
    assert billing["queue"] == "billing"
    assert billing["deferred_last_hour"] == 0
    assert billing["paused"] is False
    assert billing["oldest_ready_age_s"] >= 0.05
    assert billing["oldest_ready_ms"] <= doc["now_ms"] - 50


def test_queues_list_as_a_table(memory_ops: Ops) -> None:
    memory_ops.enqueue("charge", "c1")
    memory_ops.enqueue("receipt", "r1")
    memory_ops.cli("queues pause", "default")

    out = memory_ops.cli("queues list", json=False).out.splitlines()

    assert out[0].split() == [
        "QUEUE", "READY", "SCHEDULED", "RUNNING", "WAITING", "DEAD", "FAILED", "OLDEST", "READY",
        "DEFERRED", "1H", "PAUSED",
    ]  # fmt: skip
    assert out[1].split()[:3] == ["billing", "1", "0"]
    assert out[2].split()[0] == "default"
    assert out[2].endswith("paused")


def test_deferrals_are_summed_per_queue_through_the_apps_job_names() -> None:
    win = Window(start_ms=0, until_ms=HOUR_MS)
    win.counts = {
        ("charge", "deferred"): 3,
        ("receipt", "deferred"): 2,
        ("refund", "deferred"): 4,
        ("charge", "completed"): 7,
        ("gone", "deferred"): 5,
    }
    queue_of = {"charge": "billing", "refund": "billing", "receipt": "default"}

    assert queues_cli._deferred(win, queue_of) == {"billing": 7, "default": 2}


def test_a_count_at_the_cap_reads_at_least() -> None:
    body = {
        "queues": [
            {
                "queue": "q",
                **dict.fromkeys(queues_cli.COUNTS, 0),
                "ready": COUNT_CAP,
                "oldest_ready_age_s": 1.0,
                "paused": False,
            }
        ],
        "paused_jobs": ["send_mail"],
    }

    out = queues_cli._list_text(body).splitlines()

    assert f"{COUNT_CAP}+" in out[1]
    assert out[-1] == "paused job names: send_mail"


def test_a_paused_queue_runs_nothing_until_resumed_across_a_worker_restart(ops: Ops) -> None:
    (job_id,) = ops.enqueue("charge", "c1")
    ops.enqueue("receipt", "r1")

    paused = ops.cli("queues pause", "billing")
    first = ops.work()
    restarted = ops.work()
    listed = ops.cli("queues list").doc
    resumed = ops.cli("queues resume", "billing")
    after = ops.work()

    assert paused.code == 0
    assert paused.doc == {
        "version": 1,
        "kind": "queues.pause",
        "target": {"kind": "queue", "name": "billing"},
        "changed": True,
    }
    assert (first.completed, restarted.completed) == (1, 0)  # only the default queue's receipt
    assert [q["paused"] for q in listed["queues"] if q["queue"] == "billing"] == [True]
    assert resumed.doc["changed"] is True
    assert after.completed == 1
    assert ops.cli("jobs show", job_id).doc["job"]["state"] == "completed"


def test_pausing_twice_and_resuming_an_unpaused_queue_say_nothing_changed(ops: Ops) -> None:
    ops.cli("queues pause", "billing", url=True)

    again = ops.cli("queues pause", "billing", url=True, json=False)
    ops.cli("queues resume", "billing", url=True)
    not_paused = ops.cli("queues resume", "billing", url=True, json=False)

    assert again.out == "queue billing was already paused\n"
    assert not_paused.out == "queue billing was not paused\n"


def test_a_paused_job_name_runs_nowhere_until_resumed(ops: Ops) -> None:
    ops.enqueue("receipt", "r1")

    paused = ops.cli("jobs pause", "--name", "receipt", json=False)
    listed = ops.cli("queues list").doc
    blocked = ops.work()
    resumed = ops.cli("jobs resume", "--name", "receipt")
    ran = ops.work()

    assert paused.out == "paused job receipt\n"
    assert listed["paused_jobs"] == ["receipt"]
    assert blocked.completed == 0
    assert resumed.doc["kind"] == "jobs.resume"
    assert ran.completed == 1


def test_a_bad_queue_name_is_refused(memory_ops: Ops) -> None:
    result = memory_ops.cli("queues pause", "no such queue")

    assert result.code == 2
    assert result.error["code"] == "XJOBS_QUEUE_INVALID"


def test_pause_needs_its_name(memory_ops: Ops) -> None:
    assert memory_ops.cli("queues pause").error["code"] == "XJOBS_USAGE"
    assert memory_ops.cli("jobs pause").error["code"] == "XJOBS_USAGE"
