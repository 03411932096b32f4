"""`xjobs scheduler MODULE:APP`: its flags, its refusals (exit 2), and an app without tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from xjobs_cli.main import main

APP_WITH_A_TASK = '''
from pydantic import BaseModel
import xjobs


class Day(BaseModel):
    day: str


@xjobs.job(tenant="none", idempotency_key=lambda d: d.day)
async def report(ctx: xjobs.JobContext, input: Day) -> None:
    """The job the task fires."""


nightly = xjobs.task(job=report, cron="0 3 * * *", tz="UTC", input=lambda at: Day(day=str(at)))
app = xjobs.App("memory://", tasks=[nightly])
no_tasks = xjobs.App("memory://", jobs=[report], retention=None)  # no purge task either
'''


def test_help_names_the_leadership_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scheduler", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--leader-ttl", "--renew-every", "--misfire-grace", "--drain-timeout"):
        assert flag in out


def test_a_renewal_longer_than_half_the_lease_exits_2_naming_it(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "cron_cli_app.py").write_text(APP_WITH_A_TASK)
    code = main(["scheduler", "cron_cli_app:app", "--leader-ttl", "10", "--renew-every", "6"])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: XJOBS_OPTION_INVALID: renew_every" in err
    assert "Traceback" not in err


def test_an_app_without_tasks_exits_2(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (app_dir / "cron_cli_app.py").write_text(APP_WITH_A_TASK)
    code = main(["scheduler", "cron_cli_app:no_tasks"])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: XJOBS_APP_STATE: no task to schedule" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["scheduler"],
        ["scheduler", "x:app", "--leader-ttl", "soon"],
        ["scheduler", "x:app", "--renew-every", "-1"],
    ],
)
def test_a_usage_error_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: xjobs" in capsys.readouterr().err
