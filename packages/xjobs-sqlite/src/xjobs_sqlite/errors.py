"""The SQLite driver's refusals, and the one translation of sqlite3's errors into xjobs refusals."""

from __future__ import annotations

import sqlite3

from xjobs.errors import BackendError, BackendUnavailableError, XJobsError

# The primary result codes of a lock another connection holds: the file is busy (SQLITE_BUSY) or
# a table of a shared cache is (SQLITE_LOCKED). Either may clear; the driver retries them.
SQLITE_BUSY = 5
SQLITE_LOCKED = 6


class SqliteUrlInvalidError(XJobsError):
    """A `sqlite://` URL names no file this driver can share between processes, or an unknown option.

    To do: Use `sqlite:///relative/path.db` or `sqlite:////absolute/path.db` in an existing
    directory (`memory://` for an in-memory store), with only the options `synchronous=normal`
    or `full`, `mode=` octal permissions that keep the owner's read and write (0600, 0640,
    0660), and `driver=sqlite3` or `apsw` (which needs `pip install 'xjobs-sqlite[apsw]'`).
    """

    code = "XJOBS_SQLITE_URL_INVALID"


class SqliteNetworkFilesystemError(XJobsError):
    """The database file is on a network filesystem, where WAL cannot share its lock between hosts.

    To do: Put the database file on a local disk, or use Postgres for several hosts.
    """

    code = "XJOBS_SQLITE_NETWORK_FS"


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` is a lock held by another connection (retried inside the driver, bounded)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def interpret_error(exc: BaseException) -> XJobsError:
    """An `XJobsError` for an engine error: a lock or a file it cannot reach (retryable), or a refusal."""
    if isinstance(exc, XJobsError):
        return exc
    if is_busy(exc) or isinstance(exc, OSError):
        return BackendUnavailableError(f"SQLite is unavailable: {type(exc).__name__}: {exc}")
    if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
        return BackendUnavailableError(f"SQLite cannot open its file: {exc}")
    return BackendError(f"SQLite refused a statement: {type(exc).__name__}: {exc}")
