"""The wake across processes: `PRAGMA data_version` polled on the writer's connection while a worker listens.

SQLite has no LISTEN. `data_version` changes when another connection (another process, or
another backend in this one) commits to the file, and costs microseconds: the writer's thread
reads it every `WAKE_POLL_MS` between its calls, once a listener subscribed (a process that only
enqueues never polls), and wakes every queue when it moved. The writer's own commits do not move
it; the driver wakes its own process's listeners itself. The claim poll stays the guarantee.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from xjobs.contract.backend import WakeSource
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.guards import warn_old_sqlite

WAKE_POLL_MS: Final = 10


class DataVersionWake:
    """Feeds `source` from the writer thread's idle poll (`IdlePoll`)."""

    interval_s: float = WAKE_POLL_MS / 1000

    def __init__(self, source: WakeSource, version: tuple[int, int, int]) -> None:
        self._source = source
        self._version = version  # the SQLite the driver runs: whether the WAL-reset race applies
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seen: int | None = None

    @property
    def active(self) -> bool:
        """Whether a listener subscribed (and its loop still runs)."""
        return self._loop is not None

    def start(self, loop: asyncio.AbstractEventLoop, nudge: Callable[[], None]) -> None:
        """Begin polling, answering on `loop`; the poll is local, so the wake is live at once."""
        self._loop = loop
        self._source.set_live(True)
        nudge()

    def poll(self, conn: Connection) -> None:
        """Read `data_version`; wake every queue when another connection committed since (and at
        the first reading)."""
        (version,) = conn.execute("pragma data_version").fetchone()
        seen, self._seen = self._seen, int(version)
        loop = self._loop
        if seen == version or loop is None:
            return
        if seen is not None:
            warn_old_sqlite(
                self._version
            )  # another connection writes the file: the WAL-reset race applies
        # The first poll wakes too: a commit between the subscribe and this first reading would
        # otherwise be taken for the starting version and wait for the claim poll.
        try:
            loop.call_soon_threadsafe(self._source.emit, None)
        except RuntimeError:
            self._loop = None  # the listeners' loop is closed: stop polling
