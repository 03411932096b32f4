"""An idle worker costs the file nothing: its claim pass, presence included, commits no change
that another process would see (no WAL frame, no wake of every other process's poll)."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.stores import WorkerInfo
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.testing import file_url

TTL_MS = 60_000


@pytest.mark.asyncio
async def test_an_idle_claim_pass_with_a_fresh_presence_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    clock = ManualClock()
    backend = await open_backend(file_url(path), clock=clock)
    watcher = sqlite3.connect(path)
    try:
        assert backend.workers is not None
        now = clock.now_ms()
        info = WorkerInfo("w", socket.gethostname(), 1, ("q",), now, now)
        await backend.workers.announce(info, TTL_MS)
        before = watcher.execute("pragma data_version").fetchone()
        clock.advance(5_000)
        options = ClaimOptions("w", {"q": 10}, lease_ms=30_000, presence_ttl_ms=TTL_MS)
        assert (await backend.jobs.claim(options)).jobs == ()
        assert watcher.execute("pragma data_version").fetchone() == before
    finally:
        watcher.close()
        await backend.close()
