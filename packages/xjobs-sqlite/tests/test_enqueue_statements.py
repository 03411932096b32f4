"""A new row with no flow is one statement; a held id or namespace still answers its holder."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from xjobs.testing.rows import new_job
from xjobs_sqlite.enqueue import enqueue_rows
from xjobs_sqlite.install import install

NOW = 1_000_000


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "xjobs.db", isolation_level=None)
    install(connection, NOW)
    try:
        yield connection
    finally:
        connection.close()


def test_a_new_row_without_a_flow_is_one_statement(conn: sqlite3.Connection) -> None:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    done = enqueue_rows(conn, [new_job(queue="a")], NOW)
    conn.set_trace_callback(None)
    assert [r.deduped for r in done.results] == [False]
    assert len(statements) == 1


def test_a_held_id_and_a_held_namespace_answer_their_holders(conn: sqlite3.Connection) -> None:
    first = new_job(queue="a", idempotency_key="k")
    enqueue_rows(conn, [first], NOW)
    again = enqueue_rows(conn, [first], NOW).results[0]
    namesake = enqueue_rows(conn, [new_job(queue="a", idempotency_key="k")], NOW).results[0]
    assert (again.job_id, again.deduped) == (first.id, True)
    assert (namesake.job_id, namesake.deduped) == (first.id, True)
