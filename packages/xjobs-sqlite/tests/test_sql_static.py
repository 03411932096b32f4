"""The driver's SQL as a reviewer reads it: every statement names its columns, and each one prepares
against the installed schema."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator

import pytest

from xjobs_sqlite.claim import claim_statement
from xjobs_sqlite.install import install
from xjobs_sqlite.sql import statements

WHOLE_ROW = re.compile(r"\b(select|returning)\s+\*", re.IGNORECASE)
PARAM = re.compile(r":([a-z_0-9]+)")
# Not statements of their own: the DDL (install runs it) and the pieces of the claim.
PIECES = frozenset({"ddl", "claim_head", "claim_queue", "claim_tail"})


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    path = tmp_path_factory.mktemp("sql") / "xjobs.db"
    connection = sqlite3.connect(path, isolation_level=None)
    install(connection, 0)
    try:
        yield connection
    finally:
        connection.close()


@pytest.mark.parametrize("name", sorted(statements()))
def test_no_statement_reads_a_whole_row(name: str) -> None:
    assert not WHOLE_ROW.search(statements()[name])


@pytest.mark.parametrize("name", sorted(set(statements()) - PIECES))
def test_every_statement_prepares_against_the_installed_schema(
    conn: sqlite3.Connection, name: str
) -> None:
    text = statements()[name]
    conn.execute(f"explain {text}", dict.fromkeys(PARAM.findall(text))).fetchall()


def test_the_claim_of_several_queues_prepares(conn: sqlite3.Connection) -> None:
    text = claim_statement(3)
    conn.execute(f"explain {text}", dict.fromkeys(PARAM.findall(text))).fetchall()
