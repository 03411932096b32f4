"""The import-linter contracts of `.importlinter` hold on the tree, and break on a planted violation.

`uv run nox -s imports` runs the same `lint-imports`; this test proves the contracts are not
vacuous: a copy of the sources with one forbidden import planted fails the named contract.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for p in ROOT.glob("packages/*/src/*") if p.is_dir() and "." not in p.name)


def _lint_imports(pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the sources found first on `pythonpath`, against `.importlinter`."""
    command = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run(
        [str(command), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A copy of every distribution's import package, found before the installed ones."""
    for src in SOURCES:
        shutil.copytree(src, tmp_path / src.name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _plant(sources: Path, module: str, line: str) -> None:
    path = sources / f"{module.replace('.', '/')}.py"
    path.write_text(path.read_text() + f"\n{line}  # planted\n")


def test_the_contracts_hold_on_the_tree(sources: Path) -> None:
    result = _lint_imports(sources)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("xjobs.app", "import xjobs_web", "Core imports no other distribution"),
        ("xjobs.contract.driver", "import xjobs.run.settle", "The layers of core"),
        ("xjobs_web.pages", "import xjobs_cli.main", "Every distribution sits above core"),
        ("xjobs_pg.driver", "import xjobs_redis.keys", "No driver imports another"),
    ],
)
def test_a_planted_violation_breaks_its_contract(
    sources: Path, module: str, line: str, broken: str
) -> None:
    _plant(sources, module, line)
    result = _lint_imports(sources)
    assert result.returncode != 0
    assert re.search(rf"{re.escape(broken)}\s*BROKEN", result.stdout), result.stdout
