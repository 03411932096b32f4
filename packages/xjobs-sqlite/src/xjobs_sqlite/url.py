"""A `sqlite://` URL read into the file it names and its options, refused before anything is opened."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from xjobs_sqlite.connection import Driver
from xjobs_sqlite.errors import SqliteUrlInvalidError

Synchronous = Literal["normal", "full"]
SYNCHRONOUS: Final[tuple[Synchronous, ...]] = ("normal", "full")
DRIVERS: Final[tuple[Driver, ...]] = ("sqlite3", "apsw")
OPTIONS: Final = ("synchronous", "mode", "driver")
# A new database file is created readable and writable by its owner only (its WAL and shared
# memory files take the same mode): payloads and results are not for other local users.
DEFAULT_MODE: Final = 0o600
_IN_MEMORY: Final = frozenset({"", ":memory:"})


@dataclass(frozen=True, slots=True)
class SqliteTarget:
    """The database file (absolute) and how hard a commit waits for the disk."""

    path: str
    synchronous: Synchronous = "normal"
    mode: int = DEFAULT_MODE
    driver: Driver = "sqlite3"


def parse_url(url: str) -> SqliteTarget:
    """`sqlite:///relative/path.db` (from the working directory) or `sqlite:////absolute/path.db`.

    Refused: a host (`sqlite://host/...`: WAL needs one host's shared memory), no path or
    `:memory:` (every connection would see its own empty database, and no other process any), a
    directory that does not exist, and an unknown option. `?synchronous=full` makes every commit
    wait for the disk; the default `normal` is durable across a process crash, and may lose the
    last commits (never corrupt the file) on a power loss. `?mode=0640` (octal) is the mode a NEW
    file is created with (default 0600, owner only); the owner keeps read and write, no one is
    given execute, and an existing file's mode is never changed. `?driver=apsw` runs the driver's
    connections on apsw (`pip install 'xjobs-sqlite[apsw]'`), which bundles a current SQLite;
    the standard library's `sqlite3` (`driver=sqlite3`) is the default.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        raise SqliteUrlInvalidError(f"{url!r} is not a sqlite:// URL")
    if parts.netloc:
        raise SqliteUrlInvalidError(
            f"{url!r} names a host ({parts.netloc!r}): SQLite shares a file between the processes "
            "of one host only; write sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    # The path of `sqlite:///a.db` is `/a.db`: the first slash ends the empty host.
    path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if path in _IN_MEMORY:
        raise SqliteUrlInvalidError(
            f"{url!r} names no file: an in-memory SQLite database lives in one connection of one "
            "process; use memory:// for a process-local store, or name a file (sqlite:///xjobs.db)"
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise SqliteUrlInvalidError(
            f"{url!r} has unknown options {unknown}; known: {', '.join(OPTIONS)}"
        )
    synchronous = options.get("synchronous", "normal").lower()
    if synchronous not in SYNCHRONOUS:
        raise SqliteUrlInvalidError(
            f"{url!r}: synchronous={synchronous!r} is not one of {', '.join(SYNCHRONOUS)}"
        )
    mode = _mode(url, options.get("mode"))
    driver = _driver(url, options.get("driver", "sqlite3").lower())
    absolute = os.path.abspath(path)
    directory = os.path.dirname(absolute)
    if not os.path.isdir(directory):
        raise SqliteUrlInvalidError(
            f"{url!r}: the directory {directory!r} does not exist; create it first"
        )
    return SqliteTarget(
        path=absolute,
        synchronous="full" if synchronous == "full" else "normal",
        mode=mode,
        driver=driver,
    )


def _driver(url: str, name: str) -> Driver:
    """The `?driver=` asked: `sqlite3` (the default) or `apsw`, which must be installed."""
    if name == "sqlite3":
        return "sqlite3"
    if name != "apsw":
        raise SqliteUrlInvalidError(f"{url!r}: driver={name!r} is not one of {', '.join(DRIVERS)}")
    if importlib.util.find_spec("apsw") is None:
        raise SqliteUrlInvalidError(
            f"{url!r} asks for driver=apsw, which is not installed: "
            "pip install 'xjobs-sqlite[apsw]' (or drop ?driver=apsw for the standard library's sqlite3)"
        )
    return "apsw"


def _mode(url: str, text: str | None) -> int:
    """The `?mode=` of a new file: octal, owner read and write, no execute bit, nothing beyond 0666."""
    if text is None:
        return DEFAULT_MODE
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if mode < 0 or mode & ~0o666 or mode & 0o600 != 0o600:
        raise SqliteUrlInvalidError(
            f"{url!r}: mode={text!r} must be octal permissions of at most 0666 that give the owner "
            "read and write (e.g. 0600, 0640, 0660)"
        )
    return mode
