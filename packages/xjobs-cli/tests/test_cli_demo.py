"""`xjobs demo` runs its 40 jobs to their expected ends in a few seconds and prints a summary;
its jobs are kept in a SQLite file, so a run killed half-way is resumed by the next one."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xjobs
from xjobs.contract.driver import FINISHED_STATES
from xjobs_cli.demo_batch import stored_jobs
from xjobs_cli.demo_cli import run_demo
from xjobs_cli.main import main

KILL_WITHIN_S = 60.0


@pytest.fixture(autouse=True)
def scratch(app_dir: Path) -> Path:
    """Every demo here runs in an empty working directory (where its xjobs-demo.db is made)."""
    return app_dir


# job: (jobs, completed, retried, dead, failed) — the rule each kind demonstrates.
EXPECTED = {
    "import_catalog": (1, 1, 0, 0, 0),
    "send_welcome_email": (20, 20, 0, 0, 0),
    "resize_image": (10, 10, 0, 0, 0),
    "sync_inventory": (4, 4, 4, 0, 0),  # fails once, completes on the retry
    "charge_card": (3, 0, 0, 3, 0),  # raises Terminal: dead at once
    "call_partner_api": (2, 0, 2, 0, 2),  # Retry(attempts=2, dead_letter=False): failed
    "total": (40, 35, 6, 3, 2),
}


def _table(out: str) -> dict[str, tuple[int, ...]]:
    rows: dict[str, tuple[int, ...]] = {}
    for line in out.splitlines():
        words = line.split()
        if words and words[0] in EXPECTED:
            numbers = [w for w in words[1:] if w.isdigit()]
            rows[words[0]] = tuple(int(n) for n in numbers[:5])
    return rows


def test_demo_exits_0_and_every_kind_reaches_its_expected_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["demo"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert _table(out) == EXPECTED
    assert "all 40 jobs reached their expected state" in out


def test_demo_keeps_its_jobs_in_xjobs_demo_db_in_the_working_directory(
    capsys: pytest.CaptureFixture[str], scratch: Path
) -> None:
    main(["demo"])

    assert "enqueued 40 jobs of 6 kinds in xjobs-demo.db" in capsys.readouterr().out
    assert (scratch / "xjobs-demo.db").is_file()


def test_demo_with_memory_keeps_no_file(capsys: pytest.CaptureFixture[str], scratch: Path) -> None:
    code = main(["demo", "--memory"])

    assert code == 0
    assert "enqueued 40 jobs of 6 kinds in memory://" in capsys.readouterr().out
    assert list(scratch.iterdir()) == []


def test_a_demo_run_after_a_finished_one_starts_a_fresh_batch_of_40(
    capsys: pytest.CaptureFixture[str], scratch: Path
) -> None:
    url = f"sqlite:///{scratch / 'again.db'}"
    main(["demo", "--url", url])

    code = main(["demo", "--url", url])

    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("enqueued 40 jobs of 6 kinds") == 2
    assert _table(out.rsplit("enqueued", 1)[1]) == EXPECTED
    assert len(asyncio.run(_stored(url))) == 40


async def _stored(url: str) -> dict[str, str]:
    async with xjobs.App(url, retention=None) as app:
        return {job.id: job.state for job in await stored_jobs(app)}


def _kill_mid_run(url: str, cwd: Path) -> None:
    """Start `xjobs demo` in a process of its own; SIGKILL it once some jobs finished and some
    are still live."""
    demo = subprocess.Popen(
        [sys.executable, "-m", "xjobs_cli", "demo", "--url", url],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + KILL_WITHIN_S
        while time.monotonic() < deadline and demo.poll() is None:
            states = list(asyncio.run(_stored(url)).values()) if Path(url[10:]).exists() else []
            finished = sum(1 for state in states if state in FINISHED_STATES)
            if finished and finished < len(states):
                demo.kill()
                break
            time.sleep(0.05)
    finally:
        if demo.poll() is None:
            demo.kill()
        _, err = demo.communicate(timeout=30)
    assert demo.returncode == -9, (
        f"the demo was not killed mid-run (exit {demo.returncode}):\n{err}"
    )


def test_a_demo_killed_mid_run_is_resumed_and_every_job_finishes_once(
    capsys: pytest.CaptureFixture[str], scratch: Path
) -> None:
    url = f"sqlite:///{scratch / 'killed.db'}"
    _kill_mid_run(url, scratch)
    left = sum(1 for state in asyncio.run(_stored(url)).values() if state not in FINISHED_STATES)

    code = main(["demo", "--url", url])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"resuming {left} job{'' if left == 1 else 's'} left in {scratch / 'killed.db'}" in out
    ends = {name: (row[0], *row[1:2], *row[3:]) for name, row in _table(out).items()}
    assert ends == {name: (row[0], *row[1:2], *row[3:]) for name, row in EXPECTED.items()}
    stored = asyncio.run(_stored(url))
    assert len(stored) == 40
    assert set(stored.values()) <= FINISHED_STATES


def test_demo_prints_the_worker_stats(capsys: pytest.CaptureFixture[str]) -> None:
    main(["demo"])

    line = next(line for line in capsys.readouterr().out.splitlines() if "claimed=" in line)
    stats = dict(pair.split("=") for pair in line.split())
    assert stats | {"claimed": "46", "completed": "35", "retried": "6"} == stats
    assert (stats["dead_lettered"], stats["dropped"], stats["interrupted"]) == ("3", "2", "0")


@pytest.mark.asyncio
async def test_demo_redraws_one_status_line_on_a_terminal() -> None:
    out = io.StringIO()

    result = await run_demo(out, tty=True)

    text = out.getvalue()
    assert result.ok
    assert text.count("\r") >= 2
    assert text.split("\r")[-1].strip().endswith("import_catalog [####################] 100%")


def test_demo_that_runs_out_of_time_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["demo", "--timeout", "0"])

    assert code == 1
    assert "TIMED OUT" in capsys.readouterr().out
