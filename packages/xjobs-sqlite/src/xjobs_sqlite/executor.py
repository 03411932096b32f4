"""The driver's two connections, each on its daemon thread: the one writer of this process, and a reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from xjobs.clock import Clock
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.thread import BusyPolicy, ConnectionThread, IdlePoll
from xjobs_sqlite.url import SqliteTarget

T = TypeVar("T")


# A checkpoint that reset the WAL truncates its file to this size: a burst (or a purge) does not
# leave a WAL of its own size behind for good.
WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024


def writer_pragmas(target: SqliteTarget, busy: BusyPolicy) -> list[str]:
    """WAL (readers never block the writer, nor it them), the durability asked, the busy wait."""
    return [
        f"pragma busy_timeout = {int(busy.timeout_ms)}",
        "pragma journal_mode = wal",
        f"pragma journal_size_limit = {WAL_SIZE_LIMIT}",
        f"pragma synchronous = {'full' if target.synchronous == 'full' else 'normal'}",
        "pragma foreign_keys = off",
    ]


def reader_pragmas(busy: BusyPolicy) -> list[str]:
    """The reader never writes: `query_only` makes a write there an error, not a lock upgrade."""
    return [f"pragma busy_timeout = {int(busy.timeout_ms)}", "pragma query_only = on"]


class Executor:
    """Runs work on the writer (in `BEGIN IMMEDIATE`) or the reader (in a read snapshot)."""

    def __init__(
        self,
        target: SqliteTarget,
        clock: Clock,
        busy: BusyPolicy,
        idle: IdlePoll | None = None,
    ) -> None:
        self.target = target
        self.clock = clock
        self.writer = ConnectionThread(
            target.path,
            name=f"xjobs-sqlite-writer:{target.path}",
            pragmas=writer_pragmas(target, busy),
            busy=busy,
            idle=idle,
            driver=target.driver,
        )
        self.reader = ConnectionThread(
            target.path,
            name=f"xjobs-sqlite-reader:{target.path}",
            pragmas=reader_pragmas(busy),
            busy=busy,
            driver=target.driver,
        )

    async def start(self) -> None:
        """Open the writer first (it switches the file to WAL), then the reader."""
        await self.writer.start()
        try:
            await self.reader.start()
        except BaseException:
            await self.writer.close()
            raise

    def now(self) -> int:
        """The driver's now: the injected clock's epoch ms (SQLite has no server clock to share)."""
        return self.clock.now_ms()

    async def write(self, work: Callable[[Connection], T]) -> T:
        """`work(conn)` in one `BEGIN IMMEDIATE` transaction on this process's writer."""
        return await self.writer.call(work, write=True)

    async def read(self, work: Callable[[Connection], T]) -> T:
        """`work(conn)` in one read snapshot on the reader."""
        return await self.reader.call(work, write=False)

    async def close(self) -> None:
        """Close both connections, the writer last."""
        await self.reader.close()
        await self.writer.close()
