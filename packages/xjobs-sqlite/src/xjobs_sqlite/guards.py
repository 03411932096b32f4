"""What a file must be for several processes to share it safely: on a local filesystem, with a SQLite
that has the WAL-reset fix, created readable by its owner only.

WAL keeps its index in shared memory beside the file, which only processes of one host can share:
on a network filesystem (NFS, SMB, sshfs, ...) two hosts would each believe they hold the write
lock, and the file corrupts. SQLite before 3.51.3 can corrupt a WAL database when it resets the
WAL while another process writes; the remedy is `xjobs-sqlite[apsw]` with `?driver=apsw` (apsw
bundles a current SQLite), or a Python whose `sqlite3` links 3.51.3 or later.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from xjobs_sqlite.errors import SqliteNetworkFilesystemError

log = logging.getLogger("xjobs_sqlite")

NETWORK_FILESYSTEMS: Final = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "fuse.sshfs",
        "fuse.glusterfs",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
    }
)
WAL_RESET_FIXED: Final = (3, 51, 3)
MOUNTS: Final = Path("/proc/mounts")

_warned = False


def filesystem_of(path: str, mounts: str) -> str | None:
    """The type of the filesystem `path` lives on, read from a `/proc/mounts` text (`None`: unknown)."""
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def refuse_network_filesystem(path: str, mounts_file: Path = MOUNTS) -> None:
    """Refuse a database file on a network filesystem (where `/proc/mounts` tells; elsewhere, trust it)."""
    try:
        mounts = mounts_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    kind = filesystem_of(os.path.realpath(os.path.dirname(path)), mounts)
    if kind in NETWORK_FILESYSTEMS:
        raise SqliteNetworkFilesystemError(
            f"{path} is on a network filesystem ({kind}): SQLite's WAL shares its lock in memory "
            "of one host, so processes of two hosts would corrupt it; put the file on a local "
            "disk, or use Postgres for a fleet of hosts"
        )


def create_private(path: str, mode: int) -> None:
    """Create the database file with `mode` (before SQLite would create it with the umask's),
    unless it exists: SQLite gives its WAL and shared-memory files the database file's mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, mode)  # the umask may have taken bits the mode asked for
    finally:
        os.close(fd)


def wal_reset_fixed(version: tuple[int, int, int]) -> bool:
    """Whether the linked SQLite has the WAL-reset fix (3.51.3)."""
    return version >= WAL_RESET_FIXED


def warn_old_sqlite(version: tuple[int, int, int]) -> None:
    """Log once per process that the SQLite the driver runs (`version`) predates the WAL-reset fix,
    naming the remedy (called when another connection's commit shows that more than one process
    writes)."""
    global _warned
    if _warned or wal_reset_fixed(version):
        return
    _warned = True
    log.warning(
        "the linked SQLite %s predates 3.51.3, whose fix of a WAL reset race matters when more "
        "than one process writes the file; install xjobs-sqlite[apsw] and add ?driver=apsw to "
        "the sqlite:// URL of every process (apsw bundles a current SQLite), or run on a Python "
        "whose sqlite3 links SQLite 3.51.3 or later, or keep one process writing the file",
        ".".join(map(str, version)),
    )
