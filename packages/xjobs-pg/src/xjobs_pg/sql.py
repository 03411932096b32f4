"""The package's SQL: `.sql` files beside this module, one `-- name:` block per statement, loaded once.

A `-- fragment: x` block is text several statements share, written into them where they say `{x}`
(a fragment may name another: it is written out first).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from xjobs_pg.schema import wake_channel

_BLOCK = re.compile(r"^-- (name|fragment): ([a-z_]+)\s*$", re.M)
_COMMENT = re.compile(r"--[^\n]*")
# A statement: text up to a semicolon, where a `$$` body (a do block) is kept whole.
_STATEMENT = re.compile(r"(?:\$\$.*?\$\$|[^;])+", re.S)
SQL_FILES = (
    "jobs.sql",
    "settle.sql",
    "operator.sql",
    "listing.sql",
    "bulk.sql",
    "ledger.sql",
    "stores.sql",
    "rates.sql",
    "steps.sql",
    "events.sql",
    "scheduler.sql",
    "outbox.sql",
    "results.sql",
    "pooling.sql",
    "purge.sql",
    "backfills.sql",
    "webhooks.sql",
    "children.sql",
)


def read_sql(filename: str) -> str:
    """The text of one of the package's `.sql` files."""
    return resources.files("xjobs_pg").joinpath("sql", filename).read_text(encoding="utf-8")


def strip_comments(text: str) -> str:
    """`text` without its `--` comments (statements here never hold `--` inside a literal)."""
    return _COMMENT.sub("", text)


def split_statements(text: str) -> list[str]:
    """Cut DDL at semicolons outside a `$$` body; its comments carry no `;` and no `'` (a test pins that)."""
    return [part.strip() for part in _STATEMENT.findall(strip_comments(text)) if part.strip()]


@cache
def _named() -> dict[str, str]:
    blocks: dict[str, dict[str, str]] = {"name": {}, "fragment": {}}
    for filename in SQL_FILES:
        text = read_sql(filename)
        marks = list(_BLOCK.finditer(text))
        for i, mark in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
            body = strip_comments(text[mark.end() : end]).strip().rstrip(";").strip()
            kind, name = mark.groups()
            if name in blocks["name"] or name in blocks["fragment"]:
                raise RuntimeError(f"statement or fragment {name!r} is named twice")
            blocks[kind][name] = body
    fragments = blocks["fragment"]
    for _ in range(len(fragments)):
        fragments = {name: _written(body, fragments) for name, body in fragments.items()}
    return {name: _written(body, fragments) for name, body in blocks["name"].items()}


def _written(body: str, fragments: dict[str, str]) -> str:
    for fragment, text in fragments.items():
        body = body.replace("{" + fragment + "}", text)
    return body


class Statements:
    """Every named statement rendered for one schema (a validated, quoted identifier).

    `{wake_channel}` is the schema's wake channel as a literal: the name is validated
    (`[a-z0-9_]`), so it needs no escaping, and a statement that wakes a parked parent notifies
    it without a parameter of its own.
    """

    def __init__(self, quoted_schema: str) -> None:
        channel = "'" + wake_channel(quoted_schema.strip('"')) + "'"
        self._sql = {
            name: body.replace("{schema}", quoted_schema).replace("{wake_channel}", channel)
            for name, body in _named().items()
        }

    def __getitem__(self, name: str) -> str:
        return self._sql[name]

    def names(self) -> list[str]:
        return sorted(self._sql)
