"""A new database file, its WAL and its shared memory are its owner's alone unless the URL widens them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.testing import file_url


def _modes(path: Path) -> dict[str, int]:
    found = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in found if p.exists()}


@pytest.mark.asyncio
async def test_a_new_file_and_its_wal_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    backend = await open_backend(file_url(path), clock=ManualClock())
    try:
        await backend.jobs.enqueue([new_job()])
        modes = _modes(path)
        assert f"{path.name}-wal" in modes
        assert set(modes.values()) == {0o600}
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_the_url_may_give_a_new_file_to_the_owner_s_group(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    old = os.umask(0o077)  # the mode asked for is applied whatever the umask
    try:
        backend = await open_backend(f"{file_url(path)}?mode=0660", clock=ManualClock())
    finally:
        os.umask(old)
    try:
        assert _modes(path)[path.name] == 0o660
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "xjobs.db"
    path.touch(mode=0o640)
    path.chmod(0o640)
    backend = await open_backend(file_url(path), clock=ManualClock())
    try:
        assert _modes(path)[path.name] == 0o640
    finally:
        await backend.close()
