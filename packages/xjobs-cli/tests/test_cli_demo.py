"""`xjobs demo` runs its 40 jobs to their expected ends in a few seconds and prints a summary."""

from __future__ import annotations

import io

import pytest

from xjobs_cli.demo_cli import run_demo
from xjobs_cli.main import main

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
