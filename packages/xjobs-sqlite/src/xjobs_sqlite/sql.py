"""The package's SQL: `.sql` files beside this module, one `-- name:` block per statement, loaded once."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_BLOCK = re.compile(r"^-- name: ([a-z_]+)\s*$", re.M)
_COMMENT = re.compile(r"--[^\n]*")
SQL_FILES = (
    "ddl.sql",
    "jobs.sql",
    "claim.sql",
    "settle.sql",
    "moves.sql",
    "ledger.sql",
    "steps.sql",
    "listing.sql",
    "operator.sql",
    "stores.sql",
    "scheduler.sql",
    "events.sql",
    "purge.sql",
    "backfills.sql",
    "webhooks.sql",
    "outbox.sql",
    "rates.sql",
    "children.sql",
)


def read_sql(filename: str) -> str:
    """The text of one of the package's `.sql` files."""
    return resources.files("xjobs_sqlite").joinpath("sql", filename).read_text(encoding="utf-8")


def split_statements(text: str) -> list[str]:
    """Cut a block at its semicolons (no comment, literal or trigger body here holds one)."""
    return [part.strip() for part in _COMMENT.sub("", text).split(";") if part.strip()]


@cache
def statements() -> dict[str, str]:
    """Every named statement of every file, by name, its comments stripped."""
    named: dict[str, str] = {}
    for filename in SQL_FILES:
        text = read_sql(filename)
        marks = list(_BLOCK.finditer(text))
        for i, mark in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            name = mark.group(1)
            if name in named:
                raise RuntimeError(f"statement {name!r} is named twice")
            named[name] = _COMMENT.sub("", text[mark.end() : end]).strip().rstrip(";").strip()
    return named


def sql(name: str) -> str:
    """One named statement."""
    return statements()[name]
