"""Production never imports test scaffolding: loading every plugin and opening a backend leaves the
test servers, fixtures and pytest unimported (each plugin names its test backend as a string)."""

from __future__ import annotations

import json
import subprocess
import sys

SCAFFOLDING = (
    "pytest",
    "xjobs.testing",
    "xjobs_pg.testing",
    "xjobs_pg.servers",
    "xjobs_redis.testing",
    "xjobs_redis.servers",
    "xjobs_sqlite.testing",
)

PROBE = """
import asyncio, json, sys
import xjobs
from xjobs.contract.plugins import installed_backends

async def main():
    names = [b.factory.name for b in installed_backends()]
    backend = await xjobs.connect("memory://")
    await backend.close()
    return names

names = asyncio.run(main())
scaffolding = json.loads(sys.argv[1])
loaded = sorted(m for m in sys.modules if any(m == s or m.startswith(s + ".") for s in scaffolding))
print(json.dumps({"backends": names, "loaded": loaded}))
"""


def test_loading_every_plugin_imports_no_test_scaffolding() -> None:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(SCAFFOLDING)],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(run.stdout)
    assert {"memory", "postgres", "redis", "sqlite"} <= set(seen["backends"])
    assert seen["loaded"] == []
