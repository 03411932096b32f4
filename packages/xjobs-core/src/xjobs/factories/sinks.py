"""Where an export writes its objects: the `Sink` protocol (one `put` per object) and the built-in local directory sink.

An S3 or GCS sink is a class with the same `put`: the object store's single-object upload is
already atomic (a reader sees the whole object or none), and a second `put` of a name replaces it.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from xjobs.factories.backfill_errors import ExportSinkError

# A name is `/`-separated parts of `[A-Za-z0-9._-]`, none empty, `.` or `..`.
NAME_PART: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
MAX_NAME_CHARS: Final = 1_000


def object_name(name: object) -> str:
    """A relative object name a sink writes under its root, or `ExportSinkError`."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        raise ExportSinkError(f"object name {name!r} must be 1-{MAX_NAME_CHARS} characters")
    for part in name.split("/"):
        if not NAME_PART.fullmatch(part):
            raise ExportSinkError(
                f"object name {name!r}: each /-separated part is [A-Za-z0-9._-], not starting with ."
            )
    return name


@runtime_checkable
class Sink(Protocol):
    """An object store an export writes to.

    `put` writes the whole object atomically (a reader never sees half of it) and replaces an
    object of the same name, so a page written again after a crash leaves one object.
    """

    async def put(self, name: str, data: bytes) -> None:
        """Write `data` as the object `name` (relative, `/`-separated)."""
        ...


def case_safe(part: str) -> str:
    """A name part as a file name no other part shares on a case-insensitive filesystem: each
    capital letter is written as `+` and its lower case (`Org-1` -> `+org-1`; `+` is in no name)."""
    return "".join(f"+{c.lower()}" if "A" <= c <= "Z" else c for c in part)


class DirectorySink:
    """A `Sink` over a local directory: each object is a file, written to a temporary file in
    the same directory, flushed to disk, then renamed over its name (atomic on POSIX).

    Objects whose names differ only by case are distinct files on every filesystem (`case_safe`),
    and a write never leaves the root, not even through a symbolic link inside it.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path_of(self, name: str) -> Path:
        """Where the object `name` lives."""
        return self.root.joinpath(*(case_safe(part) for part in object_name(name).split("/")))

    def _inside(self, name: str, directory: Path) -> None:
        root = self.root.resolve()
        if not directory.resolve().is_relative_to(root):
            raise ExportSinkError(f"object name {name!r} leads out of the sink's root {root}")

    def _write(self, name: str, data: bytes) -> None:
        target = self.path_of(name)
        self._inside(name, target.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        self._inside(name, target.parent)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    async def put(self, name: str, data: bytes) -> None:
        """Write the object on a thread (the event loop never blocks on the disk)."""
        object_name(name)
        await asyncio.to_thread(self._write, name, data)
