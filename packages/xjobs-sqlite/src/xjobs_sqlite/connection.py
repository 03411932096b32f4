"""The connection the driver's statements run on: the part of sqlite3's it uses, met by the standard
library's `sqlite3` (the default) and by apsw (`?driver=apsw`, `apsw_connection`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any, Literal, Protocol

Driver = Literal["sqlite3", "apsw"]


class Rows(Protocol):
    """What a statement answered: its rows, and for a write the rows it changed."""

    @property
    def rowcount(self) -> int:
        """The rows the statement inserted, updated or deleted."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every row left."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The rows left, one by one."""
        ...


class Connection(Protocol):
    """One connection to the database file, used on one thread, outside any implicit transaction."""

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open."""
        ...

    def execute(self, sql: str, parameters: Any = ..., /) -> Rows:
        """Run one statement with its parameters (`:name` from a mapping, `?` from a sequence)."""
        ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Rows:
        """Run one statement once per parameter set."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...


def connect(path: str, driver: Driver, timeout_s: float) -> Connection:
    """A connection to `path` on `driver`, in autocommit (the driver opens its transactions itself)."""
    if driver == "apsw":
        from xjobs_sqlite.apsw_connection import connect_apsw

        return connect_apsw(path, timeout_s)
    return sqlite3.connect(path, isolation_level=None, timeout=timeout_s)


def linked_version(driver: Driver) -> tuple[int, int, int]:
    """The version of the SQLite library `driver` runs (apsw bundles its own)."""
    if driver == "apsw":
        from xjobs_sqlite.apsw_connection import sqlite_version

        return sqlite_version()
    return sqlite3.sqlite_version_info
