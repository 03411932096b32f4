"""The guards: a file on a network filesystem is refused, an old SQLite is named in the backend's health."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from xjobs.clock import ManualClock
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.errors import SqliteNetworkFilesystemError
from xjobs_sqlite.guards import filesystem_of, refuse_network_filesystem, wal_reset_fixed

MOUNTS = """\
/dev/sda1 / ext4 rw,relatime 0 0
server:/export /mnt/shared nfs4 rw,relatime 0 0
//nas/jobs /mnt/nas cifs rw 0 0
tmpfs /mnt/shared/local tmpfs rw 0 0
"""


def test_the_filesystem_is_that_of_the_longest_mount_point_holding_the_path() -> None:
    assert filesystem_of("/mnt/shared/app", MOUNTS) == "nfs4"
    assert filesystem_of("/mnt/shared/local/app", MOUNTS) == "tmpfs"
    assert filesystem_of("/mnt/sharedx", MOUNTS) == "ext4"
    assert filesystem_of("/mnt/nas", MOUNTS) == "cifs"


def test_a_file_on_a_network_filesystem_is_refused(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    with pytest.raises(SqliteNetworkFilesystemError) as refused:
        refuse_network_filesystem("/mnt/nas/xjobs.db", mounts)
    assert refused.value.code == "XJOBS_SQLITE_NETWORK_FS"


def test_the_wal_reset_fix_is_known_from_3_51_3() -> None:
    assert not wal_reset_fixed((3, 40, 1))
    assert wal_reset_fixed((3, 51, 3))


@pytest.mark.asyncio
async def test_the_health_says_whether_the_linked_sqlite_has_the_fix(db_url: str) -> None:
    backend = await open_backend(db_url, clock=ManualClock())
    try:
        assert backend.health["wal_reset_fixed"] == wal_reset_fixed(sqlite3.sqlite_version_info)
        assert backend.health["sqlite_version"] == sqlite3.sqlite_version
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_another_connection_s_commit_on_an_old_sqlite_logs_the_remedy(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("xjobs_sqlite.guards._warned", False)
    listening = await open_backend(db_url, clock=ManualClock())
    writing = await open_backend(db_url, clock=ManualClock())
    woken = asyncio.Event()
    try:
        assert listening.wake is not None
        listening.wake.subscribe(lambda _queue: woken.set())
        await asyncio.wait_for(woken.wait(), 5)  # the first poll: its reading is the baseline
        woken.clear()
        with caplog.at_level(logging.WARNING, logger="xjobs_sqlite"):
            await writing.jobs.enqueue([new_job()])
            await asyncio.wait_for(woken.wait(), 5)
        warned = [r.getMessage() for r in caplog.records if "3.51.3 or later" in r.getMessage()]
        assert bool(warned) is not wal_reset_fixed(sqlite3.sqlite_version_info)
        assert all("xjobs-sqlite[apsw]" in message for message in warned)
    finally:
        await writing.close()
        await listening.close()


@pytest.mark.asyncio
async def test_on_apsw_the_health_names_its_bundled_sqlite_with_the_fix(db_url: str) -> None:
    backend = await open_backend(db_url + "?driver=apsw", clock=ManualClock())
    try:
        assert backend.health["driver"] == "apsw"
        assert backend.health["wal_reset_fixed"] is True
        major, minor, patch = (int(p) for p in backend.health["sqlite_version"].split("."))
        assert (major, minor, patch) >= (3, 51, 3)
    finally:
        await backend.close()


@pytest.mark.asyncio
async def test_on_apsw_another_connection_s_commit_logs_no_warning(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("xjobs_sqlite.guards._warned", False)
    listening = await open_backend(db_url + "?driver=apsw", clock=ManualClock())
    writing = await open_backend(db_url + "?driver=apsw", clock=ManualClock())
    woken = asyncio.Event()
    try:
        assert listening.wake is not None
        listening.wake.subscribe(lambda _queue: woken.set())
        await asyncio.wait_for(woken.wait(), 5)
        woken.clear()
        with caplog.at_level(logging.WARNING, logger="xjobs_sqlite"):
            await writing.jobs.enqueue([new_job()])
            await asyncio.wait_for(woken.wait(), 5)
        assert not [r for r in caplog.records if "3.51.3" in r.getMessage()]
    finally:
        await writing.close()
        await listening.close()
