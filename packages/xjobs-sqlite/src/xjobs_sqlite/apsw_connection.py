"""apsw's connection as the driver's `Connection`: rows read at once, its errors raised as sqlite3's.

apsw bundles a current SQLite (3.51.3 or later has the WAL-reset fix that a file several processes
write needs), where the standard library's `sqlite3` links the system's. Its errors are raised as
the `sqlite3` exceptions they match, with the same `sqlite_errorcode`, so the one translation of
`errors.py` and the busy retries of `thread.py` serve both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

import apsw


class ApswRows:
    """A statement's rows, read to the end when it ran (so its `changes()` is final)."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self._next = 0
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows, self._next = self._rows[self._next :], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class ApswConnection:
    """An `apsw.Connection` in autocommit, answering as the driver's `Connection`."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn

    @property
    def in_transaction(self) -> bool:
        return bool(self._conn.in_transaction)

    def execute(self, sql: str, parameters: Any = None, /) -> ApswRows:
        try:
            before = self._conn.total_changes()
            rows = list(self._conn.execute(sql, parameters))
            return ApswRows(rows, self._conn.total_changes() - before)
        except apsw.Error as exc:
            raise as_sqlite3(exc) from exc

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> ApswRows:
        try:
            before = self._conn.total_changes()
            rows = list(self._conn.executemany(sql, parameters))
            return ApswRows(rows, self._conn.total_changes() - before)
        except apsw.Error as exc:
            raise as_sqlite3(exc) from exc

    def close(self) -> None:
        self._conn.close()


def connect_apsw(path: str, timeout_s: float) -> ApswConnection:
    """A connection to `path` that waits up to `timeout_s` for another connection's lock."""
    try:
        conn = apsw.Connection(path)
        conn.set_busy_timeout(int(timeout_s * 1000))
    except apsw.Error as exc:
        raise as_sqlite3(exc) from exc
    return ApswConnection(conn)


def sqlite_version() -> tuple[int, int, int]:
    """The version of the SQLite apsw bundles."""
    major, minor, patch = (int(part) for part in apsw.sqlite_lib_version().split(".")[:3])
    return major, minor, patch


def as_sqlite3(exc: apsw.Error) -> sqlite3.Error:
    """The `sqlite3` exception for an apsw one, carrying its extended result code."""
    code = int(getattr(exc, "extendedresult", 0) or getattr(exc, "result", 0) or 0)
    kind = (
        sqlite3.IntegrityError
        if isinstance(exc, apsw.ConstraintError)
        else sqlite3.OperationalError
    )
    error = kind(str(exc))
    error.sqlite_errorcode = code
    return error
