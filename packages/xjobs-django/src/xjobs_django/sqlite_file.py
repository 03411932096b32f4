"""Whether an xjobs SQLite URL names the file of a Django database: then the transactional outbox
stages in Django's own transaction, and the enqueueing side must never take the file's write lock
while Django may hold it."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.db import connections


def sqlite_path(url: str) -> str | None:
    """The file of a `sqlite:///relative` or `sqlite:////absolute` URL (`None`: not SQLite, or
    in memory)."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or not parts.path.startswith("/"):
        return None
    path = parts.path[1:]
    return path if path and path != ":memory:" else None


def shares_django_file(url: str, database: str) -> bool:
    """Whether `url` is the SQLite file of Django's `database` (both must exist to be compared)."""
    path = sqlite_path(url)
    if path is None or connections[database].vendor != "sqlite":
        return False
    name = str(connections[database].settings_dict.get("NAME") or "")
    try:
        return os.path.samefile(path, name)
    except OSError:  # one of them does not exist (yet): not shared so far as can be told
        return False
