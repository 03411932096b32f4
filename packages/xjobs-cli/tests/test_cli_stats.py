"""`xjobs stats`: outcomes per job name or queue from the counters, and each queue's gauges."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import xjobs
from xjobs.contract.introspection import COUNTED_OUTCOMES, HOUR_MS
from xjobs.operate.outcomes import OUTCOMES

if TYPE_CHECKING:
    from conftest import Ops

NOTHING = dict.fromkeys(OUTCOMES, 0)


def _ended(ops: Ops) -> None:
    """Two charges dead-lettered, one receipt completed."""
    ops.dead("c1", "c2")
    ops.enqueue("receipt", "r1")
    ops.work()


def test_stats_by_name_sums_each_outcome_with_a_failure_rate(ops: Ops) -> None:
    _ended(ops)

    result = ops.cli("stats", url=True)

    assert result.code == 0
    doc = result.doc
    assert (doc["version"], doc["kind"], doc["by"], doc["since_ms"]) == (
        1,
        "stats",
        "name",
        HOUR_MS,
    )
    assert doc["window"]["tiers"] == ["minute"]
    assert doc["window"]["start_ms"] <= doc["window"]["until_ms"] - HOUR_MS
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["charge"]["outcomes"] == {**NOTHING, "dead-lettered": 2}
    assert rows["receipt"]["outcomes"] == {**NOTHING, "completed": 1}
    assert (rows["charge"]["failure_rate"], rows["receipt"]["failure_rate"]) == (1.0, 0.0)
    assert doc["total"]["attempts"] == 3
    assert doc["total"]["failure_rate"] == pytest.approx(2 / 3, abs=1e-4)


def test_stats_by_queue_maps_names_through_the_apps_jobs(ops: Ops) -> None:
    _ended(ops)

    doc = ops.cli("stats", "--by", "queue").doc

    assert [(r["key"], r["outcomes"]) for r in doc["rows"]] == [
        ("billing", {**NOTHING, "dead-lettered": 2}),
        ("default", {**NOTHING, "completed": 1}),
    ]


def test_stats_show_each_queues_oldest_ready_and_dead_jobs(ops: Ops) -> None:
    _ended(ops)
    ops.enqueue("charge", "waiting")

    queues = {q["queue"]: q for q in ops.cli("stats").doc["queues"]}

    assert queues["billing"]["dead_jobs"] == 2
    assert queues["billing"]["oldest_ready_seconds"] >= 0
    assert queues["default"]["dead_jobs"] == 0


def test_a_longer_window_reads_the_coarser_tiers_and_counts_each_run_once(memory_ops: Ops) -> None:
    _ended(memory_ops)

    async def fold(app: xjobs.App) -> int:
        assert app.backend.introspection is not None
        return await app.backend.introspection.rollup_counters(app.clock.now_ms() + 2 * HOUR_MS)

    assert memory_ops.run(fold) >= 1
    week = memory_ops.cli("stats", "--since", "7d").doc
    month = memory_ops.cli("stats", "--since", "30d").doc

    assert week["window"]["tiers"] == ["hour", "minute"]
    assert month["window"]["tiers"] == ["day", "hour", "minute"]
    for doc in (week, month):
        assert doc["total"]["outcomes"] == {**NOTHING, "dead-lettered": 2, "completed": 1}


def test_stats_as_text(memory_ops: Ops) -> None:
    _ended(memory_ops)

    out = memory_ops.cli("stats", "--since", "15m", json=False).out.splitlines()

    assert out[0].startswith("last 15m: from ")
    assert out[0].endswith("(minute counters)")
    assert out[1].split()[:3] == ["NAME", "COMPLETED", "RETRIED"]
    assert out[2].split()[:4] == ["charge", "0", "0", "2"]
    assert out[4].split()[0] == "all"
    assert "100.0%" in out[2]
    assert out[5].split() == ["QUEUE", "OLDEST", "READY", "DEAD", "JOBS"]


def test_stats_with_no_run_ended_say_so(memory_ops: Ops) -> None:
    out = memory_ops.cli("stats", json=False).out

    assert "no run ended in this window" in out


def test_stats_by_queue_through_url_is_refused(memory_ops: Ops) -> None:
    result = memory_ops.cli("stats", "--by", "queue", url=True)

    assert result.code == 2
    assert result.error["code"] == "XJOBS_TARGET_INVALID"


@pytest.mark.parametrize("since", ["0m", "soon", "1y", "-1h", ""])
def test_a_bad_window_is_a_usage_error(memory_ops: Ops, since: str) -> None:
    result = memory_ops.cli("stats", "--since", since)

    assert result.code == 2
    assert result.error["code"] == "XJOBS_USAGE"


def test_the_outcomes_are_every_counted_outcome() -> None:
    assert set(OUTCOMES) == COUNTED_OUTCOMES
