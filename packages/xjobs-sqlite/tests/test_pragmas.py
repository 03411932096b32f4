"""The connection runs as documented: WAL, synchronous NORMAL (FULL on request), a 30 s busy timeout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.executor import WAL_SIZE_LIMIT
from xjobs_sqlite.testing import file_url


@pytest.mark.asyncio
async def test_the_writer_runs_in_wal_with_synchronous_normal(db_url: str) -> None:
    backend = await open_backend(db_url, clock=ManualClock())
    try:
        assert backend.health["journal_mode"] == "wal"
        assert backend.health["synchronous"] == "normal"
        assert backend.health["busy_timeout_ms"] >= 30_000
        assert backend.health["wal_size_limit"] == WAL_SIZE_LIMIT
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_synchronous_full_is_applied_when_the_url_asks(db_url: str) -> None:
    backend = await open_backend(f"{db_url}?synchronous=full", clock=ManualClock())
    try:
        assert backend.health["synchronous"] == "full"
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_the_file_is_left_in_wal_mode_for_every_process(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    backend = await open_backend(file_url(path), clock=ManualClock())
    await backend.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("pragma journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()
