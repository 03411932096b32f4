"""`xjobs --version` prints `xjobs <version>` with both distributions' versions."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from xjobs_cli.main import main


def test_version_prints_the_cli_and_core_versions(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--version"])

    cli, core = version("xjobs-cli"), version("xjobs-core")
    assert (code, capsys.readouterr().out) == (
        0,
        f"xjobs {cli} (xjobs-cli {cli}, xjobs-core {core})\n",
    )
