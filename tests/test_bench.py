"""The benchmark runs end to end (memory engine, small sizes) and judges the targets it measured."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from bench import report

ROOT = Path(__file__).parent.parent


def test_a_small_run_on_the_memory_engine_writes_the_table_and_the_json(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench", "--backends", "memory"),
            *("--workloads", "W1,W2,W3,W4,W8", "-n", "300", "--reps", "2", "--w8-runs", "30"),
            *("--out", str(tmp_path)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads((tmp_path / "latest.json").read_text())
    ours, ceiling = data["results"]["xjobs-memory"], data["results"]["ceiling-memory"]
    for workload in ("W1", "W2", "W3c10", "W3c100"):
        assert ours[workload]["jobs_per_s"] > 0
        assert ours[workload]["reps"] == 2
        assert ceiling[workload]["jobs_per_s"] > 0
    assert ours["W4"]["p50_ms"] <= ours["W4"]["p99_ms"]
    assert (ours["W8"]["step_writes_per_run"], ours["W8"]["step_reads_per_run"]) == (3.0, 1.0)
    assert "W8" not in ceiling  # only xjobs has durable steps
    assert data["machine"]["nproc"] >= 1
    assert data["versions"]["xjobs-memory"]
    took = data["took_s"]
    assert set(took) == {"run", "W1", "W2", "W3c10", "W3c100", "W4", "W8"}
    assert 0 < sum(v for k, v in took.items() if k != "run") < took["run"]
    markdown = (tmp_path / "latest.md").read_text()
    assert (
        "| workload | backend | library | figure | ratio to xjobs | ratio to ceiling |" in markdown
    )
    assert "| W3 process, c=10 | memory | xjobs-memory |" in markdown
    assert re.search(r"^The run took [\d.]+ minutes \(W1 \d+ s, .*W8 \d+ s;", markdown, re.M)
    assert {"target": "W8 memory: one step write per step, ≤ one hydrate per run"}.items() <= next(
        t for t in data["targets"] if t["target"].startswith("W8 memory")
    ).items()


def _throughput(**by_name: float) -> dict[str, dict[str, dict[str, float]]]:
    return {name: {"W3c10": {"jobs_per_s": value}} for name, value in by_name.items()}


def test_a_throughput_target_compares_with_the_best_peer_and_the_ceiling() -> None:
    results = _throughput(**{"xjobs-pg": 3000.0, "pgqueuer": 1400.0, "procrastinate": 200.0})
    results["ceiling-pg"] = {"W3c10": {"jobs_per_s": 5000.0}}
    verdicts = {t["target"]: t for t in report.targets(results)}
    peer = verdicts["W3c10 postgres: ≥ 2.0× the best peer"]
    assert (peer["measured"], peer["met"]) == ("2.14× (pgqueuer)", True)
    ceiling = verdicts["W3c10 postgres: ≥ 0.5× the ceiling"]
    assert (ceiling["measured"], ceiling["met"]) == ("0.60×", True)


def test_a_target_missed_is_reported_not_met() -> None:
    results = _throughput(**{"xjobs-redis": 900.0, "saq-redis": 700.0})
    (verdict,) = report.targets(results)
    assert (verdict["measured"], verdict["met"]) == ("1.29× (saq-redis)", False)


def test_a_workload_a_library_lacks_is_shown_as_none() -> None:
    results = {
        "xjobs-pg": {"W2": {"jobs_per_s": 10000.0}},
        "saq-pg": {"W2": {"unsupported": "no bulk enqueue"}},
    }
    rows = report.table(results)
    assert "| W2 bulk enqueue (500) | postgres | saq-pg | none |  |  |" in rows
