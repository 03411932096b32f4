"""Every file of examples/tutorial/ is shown by a tutorial page, so test_doc_blocks.py runs it.

A page includes a file with a pymdownx.snippets block (its path between two `--8<--` lines) in a
```python block; the doc blocks' test runs that block as the file, against fresh test servers,
and checks the output the page pins.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r"^--8<--\n(?P<path>examples/tutorial/[^\n]+)\n--8<--$", re.M)


def _included() -> set[str]:
    pages = (ROOT / "docs").rglob("*.md")
    return {found["path"] for page in pages for found in INCLUDE.finditer(page.read_text())}


def test_every_tutorial_file_is_included_by_a_page() -> None:
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "examples/tutorial").glob("*.py")}
    assert len(files) >= 6
    assert files - _included() == set()


def test_every_included_tutorial_file_exists() -> None:
    assert {path for path in _included() if not (ROOT / path).is_file()} == set()


def test_the_tutorial_starts_on_sqlite_and_moves_to_postgres() -> None:
    first = (ROOT / "examples/tutorial/step1_first_job.py").read_text()
    second = (ROOT / "examples/tutorial/step2_postgres.py").read_text()
    assert '"sqlite:///tutorial.db"' in first
    assert '"postgresql://' in second
