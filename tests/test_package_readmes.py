"""Every module of every distribution is named in its package README's "what each owns" table.

A module is named by its path under the import package, without `.py`, in backticks: `errors`,
`run/settle`. Parity scenario files (`test_*.py`) are named by their folder instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())


def _modules(package: Path) -> list[str]:
    if not (package / "src").exists():  # a distribution of dependencies only (xjobs-kit)
        return []
    (src,) = [p for p in (package / "src").iterdir() if p.is_dir()]
    found = []
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src)
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        if path.name.startswith("test_"):
            found.append(relative.parent.as_posix() + "/")
            continue
        found.append(relative.with_suffix("").as_posix())
    return sorted(set(found))


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_every_module_is_in_the_package_readme(package: Path) -> None:
    readme = (package / "README.md").read_text()
    missing = [m for m in _modules(package) if f"`{m}`" not in readme]
    assert not missing, f"{package.name}/README.md does not name: {', '.join(missing)}"
