"""The README's quick start is real code: it runs as printed and does what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_the_quick_start_runs_and_completes_its_job(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README has no python block"
    script = tmp_path / "quick_start.py"
    script.write_text(blocks[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "receipt for 42 (attempt 1)" in done.stdout
    assert "completed=1" in done.stdout


def test_the_workflow_example_runs_each_step_once_and_completes(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    workflow = [block for block in blocks if "ctx.step" in block]
    assert len(workflow) == 1, "the README has one workflow example"
    script = tmp_path / "workflow.py"
    script.write_text(workflow[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "charging 1250 for A-7",
        "reserved stock for A-7",
        "waiting",
        "ch_A-7: shipped by DHL",
        "completed",
    ]


def test_the_nightly_task_example_fires_the_latest_missed_night_once(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    nightly = [block for block in blocks if "task(" in block]
    assert len(nightly) == 1, "the README has one cron task example"
    script = tmp_path / "nightly.py"
    script.write_text(nightly[0])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "building the report of 2026-01-01",
        "fired for 2026-01-02 02:30:00+01:00",
    ]
