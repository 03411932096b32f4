"""Fresh, isolated SQLite backends for the parity suite: a new file under a temporary directory per test."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs_sqlite.backend import open_backend


def file_url(path: Path) -> str:
    """The `sqlite://` URL of an absolute path."""
    return f"sqlite:///{path.resolve()}"


@asynccontextmanager
async def test_backend(clock: Clock) -> AsyncIterator[Backend]:
    """A backend on a new file in its own temporary directory, removed (WAL and all) afterwards."""
    with tempfile.TemporaryDirectory(prefix="xjobs-sqlite-") as directory:
        backend = await open_backend(file_url(Path(directory) / "xjobs.db"), clock=clock)
        try:
            yield backend
        finally:
            await backend.close()
