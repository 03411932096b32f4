"""The schema xjobs installs into: validated against a strict pattern, then quoted."""

from __future__ import annotations

import re

from xjobs.errors import SchemaInvalidError

SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
DEFAULT_SCHEMA = "xjobs"


def quote_schema(name: object) -> str:
    """`name` as a quoted identifier, or `SchemaInvalidError` when it is not a plain identifier."""
    if not isinstance(name, str) or not SCHEMA_NAME.fullmatch(name):
        raise SchemaInvalidError(
            f"schema {name!r} must be 1-63 characters of [a-z0-9_], starting with a letter or _"
        )
    return f'"{name}"'


def wake_channel(name: str) -> str:
    """The NOTIFY channel of one schema's wake (a channel is a plain string to pg_notify)."""
    return f"{name}_wake"


def settled_channel(name: str) -> str:
    """The NOTIFY channel of one schema's result waiters: a watched job's id when it finishes."""
    return f"{name}_settled"
