"""The distribution as a user installs it: production loads no test scaffolding, the README maps every module."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from xjobs.contract.plugins import factory_for_name
from xjobs_pg.testing import server_url

PACKAGE = Path(__file__).resolve().parents[1]
SCAFFOLDING = ("xjobs_pg.servers", "xjobs_pg.testing", "xjobs.testing.servers")

# Run in a fresh interpreter: this test session has imported the scaffolding already.
PRODUCTION = """
import asyncio
import sys

import xjobs
import xjobs_pg
import xjobs_pg.plugin
from xjobs.contract.plugins import installed_backends

assert "postgres" in [found.factory.name for found in installed_backends()]


async def main() -> None:
    backend = await xjobs.connect(sys.argv[1])
    await backend.close()


asyncio.run(main())
print(sorted(name for name in sys.argv[2:] if name in sys.modules))
"""


def test_importing_and_connecting_load_no_test_servers(schema: str) -> None:
    url = f"{server_url()}{'&' if '?' in server_url() else '?'}xjobs_schema={schema}"
    ran = subprocess.run(
        [sys.executable, "-c", PRODUCTION, url, *SCAFFOLDING],
        check=True,
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "[]"


def test_the_plugin_names_its_test_backend_for_a_lazy_import() -> None:
    factory = factory_for_name("postgres")
    assert factory.test_backend == "xjobs_pg.testing:test_backend"


def test_the_readme_lists_every_module_with_what_it_owns() -> None:
    readme = (PACKAGE / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w/.]+)` \|", readme, flags=re.M))
    src = PACKAGE / "src" / "xjobs_pg"
    modules = {path.stem for path in src.glob("*.py")}
    sql = {f"sql/{path.name}" for path in (src / "sql").glob("*.sql")}
    assert sorted((modules | sql) - listed) == []
    assert sorted(listed - modules - sql) == []
