"""`xjobs relay MODULE:APP`: its flags and its refusals (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xjobs_cli.main import main

APP = '''
from pydantic import BaseModel
import xjobs


class Order(BaseModel):
    order_id: str


@xjobs.job(tenant="none", idempotency_key=lambda o: o.order_id)
async def receipt(ctx: xjobs.JobContext, input: Order) -> None:
    """The job the outbox holds."""


app = xjobs.App("memory://", jobs=[receipt])
'''


def test_help_names_the_relay_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relay", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--batch", "--lease", "--drain-timeout"):
        assert flag in out


@pytest.mark.parametrize(
    ("flags", "named"), [(["--batch", "0"], "batch"), (["--lease", "0.1"], "lease")]
)
def test_a_bad_option_exits_2_naming_it(
    flags: list[str], named: str, app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (app_dir / "relay_cli_app.py").write_text(APP)
    code = main(["relay", "relay_cli_app:app", *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: XJOBS_OPTION_INVALID: {named}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv", [["relay"], ["relay", "x:app", "--batch", "many"], ["relay", "x:app", "--lease", "-1"]]
)
def test_a_usage_error_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: xjobs" in capsys.readouterr().err
