"""`main()` turns a refusal into `error: <CODE>: message` on stderr and exit 2, no traceback."""

from __future__ import annotations

import pytest

from xjobs_cli.main import main


def test_an_unknown_app_exits_2_with_an_app_load_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["worker", "cli_main_no_such_module:app"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: XJOBS_APP_LOAD: module 'cli_main_no_such_module' was not found")
    assert "Traceback" not in err


@pytest.mark.usefixtures("app_dir")  # the demo app keeps its jobs in ./xjobs-demo.db
def test_an_option_the_worker_refuses_exits_2_with_its_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["worker", "xjobs_cli.demo:app", "--concurrency", "-1"])

    err = capsys.readouterr().err
    assert code == 2
    assert "error: XJOBS_OPTION_INVALID: " in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["worker"],
        ["worker", "x:app", "--concurrency", "many"],
        ["worker", "x:app", "--drain-timeout", "nan"],
        ["worker", "x:app", "--lease", "soon"],
        ["worker", "x:app", "--lease", "1e300"],
        ["worker", "x:app", "--drain-timeout", "1e300"],
        ["no-such-verb"],
        [],
    ],
)
def test_a_usage_error_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)

    assert code == 2
    assert "usage: xjobs" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--help"])

    assert code == 0
    assert "worker" in capsys.readouterr().out
