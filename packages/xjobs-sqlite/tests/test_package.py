"""The distribution as a user installs it: found through its entry point, production loads no test
scaffolding, and the file keeps its jobs across a reopen."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.plugins import factory_for_name, factory_for_url
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend

PRODUCTION = """
import asyncio, sys
import xjobs
from xjobs.contract.plugins import installed_backends

assert "sqlite" in [found.factory.name for found in installed_backends()]

async def main():
    backend = await xjobs.connect(sys.argv[1])
    await backend.close()

asyncio.run(main())
print(sorted(m for m in sys.modules if m in ("pytest", "xjobs_sqlite.testing", "xjobs.testing")))
"""


def test_the_backend_is_found_through_its_entry_point() -> None:
    assert factory_for_name("sqlite") is factory_for_url("sqlite:///x.db")


def test_connecting_loads_no_test_scaffolding(db_url: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", PRODUCTION, db_url], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "[]"


@pytest.mark.asyncio
async def test_a_reopened_file_keeps_its_jobs_and_its_schema(db_url: str) -> None:
    job = new_job()
    first = await open_backend(db_url, clock=ManualClock())
    await first.jobs.enqueue([job])
    await first.close()
    again = await open_backend(db_url, clock=ManualClock())
    try:
        record = await again.jobs.get(job.id)
        assert record is not None
        assert record.state == "ready"
    finally:
        await again.close()
