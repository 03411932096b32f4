"""The operator's reads and the purge walk their indexes: bounded whatever the table holds."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from xjobs_sqlite.install import install
from xjobs_sqlite.sql import sql


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "xjobs.db", isolation_level=None)
    install(connection, 0)
    try:
        yield connection
    finally:
        connection.close()


def _plan(conn: sqlite3.Connection, name: str, params: dict[str, object]) -> list[str]:
    return [str(row[3]) for row in conn.execute(f"explain query plan {sql(name)}", params)]


def test_a_list_page_reads_jobs_listed_in_order_without_sorting(conn: sqlite3.Connection) -> None:
    params = dict.fromkeys(
        ("before_ms", "before_id", "name", "tenant", "created_after_ms", "created_before_ms")
    )
    details = _plan(conn, "list_newest", {**params, "queue": "q", "state": "ready", "limit": 50})
    assert any("jobs_listed" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


def test_the_known_queues_are_found_by_index_descents_not_a_scan(conn: sqlite3.Connection) -> None:
    details = _plan(conn, "known_queues", {})
    assert not any(d == "SCAN jobs" for d in details), details


def test_the_purge_of_finished_jobs_walks_jobs_purgeable(conn: sqlite3.Connection) -> None:
    params = {"state": "dead", "before": 1, "name": None, "own": "[]", "limit": 10}
    details = _plan(conn, "finished_before", params)
    assert any("jobs_purgeable" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


@pytest.mark.parametrize("name", ["count_due", "oldest_due"])
def test_a_queue_s_due_reads_bound_run_at_within_each_priority(
    conn: sqlite3.Connection, name: str
) -> None:
    details = _plan(conn, name, {"queue": "q", "now": 1, "cap": 1000})
    assert any("jobs_claimable" in d and "run_at_ms<?" in d for d in details), details
