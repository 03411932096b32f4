"""The schema: created on first open in one `BEGIN IMMEDIATE` transaction, its version recorded."""

from __future__ import annotations

from typing import Final

from xjobs_sqlite import children_endings
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import split_statements, sql

SCHEMA_VERSION: Final = 10


def installed_version(conn: Connection) -> int | None:
    """The schema version the file holds, or `None` for a file without one."""
    exists = conn.execute(
        "select 1 from sqlite_master where type = 'table' and name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return None
    row = conn.execute(sql("installed_version")).fetchone()
    return None if row is None else int(row[0])


def is_current(conn: Connection) -> bool:
    """Whether the file's schema is at `SCHEMA_VERSION` already (read without a write lock, so an
    open beside another connection's write transaction does not wait for it)."""
    version = installed_version(conn)
    return version is not None and version >= SCHEMA_VERSION


def install(conn: Connection, now_ms: int) -> None:
    """Create what is missing (idempotent DDL) and record `SCHEMA_VERSION`, unless already current."""
    version = installed_version(conn)
    if version is not None and version >= SCHEMA_VERSION:
        return
    for statement in split_statements(sql("ddl")):
        conn.execute(statement)
    children_endings.upgrade(conn)
    conn.execute(sql("set_version"), {"version": SCHEMA_VERSION, "now": now_ms})
