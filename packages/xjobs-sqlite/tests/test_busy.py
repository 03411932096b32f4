"""A lock another connection holds is waited for and retried inside the driver, and surfaces only past its bound."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs.errors import BackendUnavailableError
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.testing import file_url


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("begin immediate")
    return conn


@pytest.mark.asyncio
async def test_a_lock_held_past_the_bound_is_backend_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    backend = await open_backend(
        file_url(path), clock=ManualClock(), busy_timeout_ms=20, busy_retries=2
    )
    holder = _hold_write_lock(path)
    try:
        with pytest.raises(BackendUnavailableError) as unavailable:
            await backend.jobs.enqueue([new_job()])
        assert unavailable.value.code == "XJOBS_BACKEND_UNAVAILABLE"
    finally:
        holder.execute("rollback")
        holder.close()
        await backend.close()


@pytest.mark.asyncio
async def test_a_lock_released_within_the_bound_is_waited_out(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    backend = await open_backend(file_url(path), clock=ManualClock())
    holder = _hold_write_lock(path)
    try:
        enqueue = asyncio.ensure_future(backend.jobs.enqueue([new_job()]))
        await asyncio.sleep(0.3)
        assert not enqueue.done()
        holder.execute("rollback")
        (result,) = await asyncio.wait_for(enqueue, 5)
        assert not result.deduped
    finally:
        holder.close()
        await backend.close()


@pytest.mark.asyncio
async def test_an_open_of_a_current_file_takes_no_write_lock(tmp_path: Path) -> None:
    """An App opened inside another connection's write transaction on the same file (Django's own
    transaction, a script's) opens at once when the schema is current: the version is read, not
    written, so the open does not wait on that transaction's lock."""
    path = tmp_path / "xjobs.db"
    first = await open_backend(file_url(path), clock=ManualClock())
    await first.close()
    holder = _hold_write_lock(path)
    try:
        again = await open_backend(
            file_url(path), clock=ManualClock(), busy_timeout_ms=20, busy_retries=0
        )
        await again.close()
    finally:
        holder.execute("rollback")
        holder.close()
