"""Fresh, isolated SQLite backends for the parity suite: a new file under a temporary directory per test,
on the connection `XJOBS_TEST_SQLITE_DRIVER` names (`sqlite3` by default, or `apsw`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs_sqlite.backend import open_backend

DRIVER_ENV = "XJOBS_TEST_SQLITE_DRIVER"


def file_url(path: Path) -> str:
    """The `sqlite://` URL of an absolute path."""
    return f"sqlite:///{path.resolve()}"


def parity_url(path: Path) -> str:
    """The URL of a test's file, on the driver `XJOBS_TEST_SQLITE_DRIVER` asks for (if any)."""
    driver = os.environ.get(DRIVER_ENV, "")
    return file_url(path) + (f"?driver={driver}" if driver else "")


@asynccontextmanager
async def test_backend(clock: Clock) -> AsyncIterator[Backend]:
    """A backend on a new file in its own temporary directory, removed (WAL and all) afterwards."""
    with tempfile.TemporaryDirectory(prefix="xjobs-sqlite-") as directory:
        backend = await open_backend(parity_url(Path(directory) / "xjobs.db"), clock=clock)
        try:
            yield backend
        finally:
            await backend.close()
