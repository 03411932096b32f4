"""Fixtures the SQLite package tests share: a database file of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from xjobs_sqlite.testing import file_url


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """The URL of a new database file in the test's temporary directory."""
    return file_url(tmp_path / "xjobs.db")
