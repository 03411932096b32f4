"""The outbox stages on the caller's own sqlite3 connection, inside its transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.stores import OutboxStore
from xjobs.errors import OutboxConnectionInvalidError
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.testing import file_url


def _outbox(backend: Backend) -> OutboxStore:
    assert backend.outbox is not None
    return backend.outbox


@pytest.mark.asyncio
async def test_a_committed_stage_is_pending_and_a_rolled_back_one_leaves_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "xjobs.db"
    backend = await open_backend(file_url(path), clock=ManualClock())
    conn = sqlite3.connect(path, timeout=30)
    try:
        _outbox(backend).stage_on(conn, [new_job()])
        conn.commit()
        _outbox(backend).stage_on(conn, [new_job()])
        conn.rollback()  # the caller's work failed after the stage
        assert await _outbox(backend).pending() == 1
    finally:
        conn.close()
        await backend.close()


@pytest.mark.asyncio
async def test_a_connection_to_another_file_is_refused(tmp_path: Path) -> None:
    backend = await open_backend(file_url(tmp_path / "xjobs.db"), clock=ManualClock())
    other = sqlite3.connect(tmp_path / "other.db")
    try:
        with pytest.raises(OutboxConnectionInvalidError):
            _outbox(backend).stage_on(other, [new_job()])
        with pytest.raises(OutboxConnectionInvalidError):
            _outbox(backend).stage_on(object(), [new_job()])
    finally:
        other.close()
        await backend.close()
