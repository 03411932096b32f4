"""`xjobs backends` lists the installed drivers; the memory backend ships with xjobs-core."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

import xjobs
from xjobs_cli.main import main


def test_backends_lists_the_memory_backend(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["backends"])

    out = capsys.readouterr().out
    memory = next(line for line in out.splitlines() if line.startswith("memory "))
    assert code == 0
    assert memory.split() == [
        "memory",
        "memory://",
        "xjobs-core",
        version("xjobs-core"),
        str(xjobs.DRIVER_API_VERSION),
    ]


def test_backends_json_names_schemes_distribution_and_driver_api(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["backends", "--json"])

    rows = json.loads(capsys.readouterr().out)
    memory = next(row for row in rows if row["name"] == "memory")
    assert code == 0
    assert memory["schemes"] == ["memory"]
    assert memory["distribution"] == "xjobs-core"
    assert (memory["api_version"], memory["api_compatible"]) == (xjobs.DRIVER_API_VERSION, True)
