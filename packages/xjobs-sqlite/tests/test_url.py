"""The `sqlite://` URL: the file it names, its options, and every refusal before anything is opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xjobs_sqlite.errors import SqliteUrlInvalidError
from xjobs_sqlite.url import parse_url


def test_a_relative_path_is_read_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_url("sqlite:///jobs.db").path == os.path.join(str(tmp_path), "jobs.db")


def test_four_slashes_name_an_absolute_path(tmp_path: Path) -> None:
    assert parse_url(f"sqlite:///{tmp_path}/jobs.db").path == f"{tmp_path}/jobs.db"


def test_synchronous_is_normal_unless_the_url_asks_for_full(tmp_path: Path) -> None:
    assert parse_url(f"sqlite:///{tmp_path}/a.db").synchronous == "normal"
    assert parse_url(f"sqlite:///{tmp_path}/a.db?synchronous=FULL").synchronous == "full"


def test_the_driver_is_sqlite3_unless_the_url_asks_for_apsw(tmp_path: Path) -> None:
    assert parse_url(f"sqlite:///{tmp_path}/a.db").driver == "sqlite3"
    assert parse_url(f"sqlite:///{tmp_path}/a.db?driver=apsw").driver == "apsw"


def test_driver_apsw_without_apsw_installed_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(SqliteUrlInvalidError, match=r"xjobs-sqlite\[apsw\]"):
        parse_url(f"sqlite:///{tmp_path}/a.db?driver=apsw")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite://host/jobs.db",
        "sqlite:///jobs.db?journal_mode=delete",
        "sqlite:///jobs.db?synchronous=off",
        "sqlite:///no/such/directory/jobs.db",
        "sqlite:///jobs.db?mode=0700",
        "sqlite:///jobs.db?mode=0400",
        "sqlite:///jobs.db?mode=rw",
        "sqlite:///jobs.db?driver=aiosqlite",
    ],
)
def test_a_url_naming_no_shareable_file_is_refused(url: str) -> None:
    with pytest.raises(SqliteUrlInvalidError) as refused:
        parse_url(url)
    assert refused.value.code == "XJOBS_SQLITE_URL_INVALID"
