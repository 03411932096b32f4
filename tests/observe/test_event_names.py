"""Every log event name the packages log is listed in docs/operations.md, and `--log-format json` carries it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
LOGGED = re.compile(
    r"\b(?:log|logger)\.(?:debug|info|warning|error|exception|critical)\(\s*\"(jobs\.[a-z0-9_.-]+)\""
)


def test_every_logged_event_name_is_listed_in_the_operations_guide() -> None:
    logged = {
        name
        for source in ROOT.glob("packages/*/src/**/*.py")
        for name in LOGGED.findall(source.read_text())
    }
    listed = set(
        re.findall(r"`(jobs\.[a-z0-9_.-]+)`", (ROOT / "docs" / "operations.md").read_text())
    )
    assert "jobs.settle.unowned" in logged
    assert logged - listed == set()
