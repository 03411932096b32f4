"""One SQLite connection on its own daemon thread: calls run in order, answered on the caller's loop.

The standard library's sqlite3 (and apsw) blocks; a daemon thread per connection keeps the event loop free
and never holds up the process's exit (aiosqlite's worker thread is not a daemon since 0.22, and
an unclosed connection hangs exit). A call that may write runs in `BEGIN IMMEDIATE`: the write
lock is taken (or waited for, up to the busy timeout) before the first read, so a transaction
never upgrades from read to write, the upgrade SQLite answers with SQLITE_BUSY at once whatever
the busy timeout says ("database is locked"). A busy or locked answer that still escapes is
retried here with a bounded backoff and surfaces past its bound as XJOBS_BACKEND_UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from xjobs.errors import BackendClosedError, BackendUnavailableError
from xjobs_sqlite.connection import Connection, Driver, connect
from xjobs_sqlite.errors import interpret_error, is_busy

T = TypeVar("T")
Work = Callable[[Connection], T]

BUSY_TIMEOUT_MS: Final = 30_000
# After the busy timeout ran out: up to this many more tries, the waits between them doubling.
BUSY_RETRIES: Final = 4
BUSY_BACKOFF_S: Final = 0.05


class IdlePoll(Protocol):
    """Work the thread does between calls, every `interval_s` while `active` (the wake's poll)."""

    @property
    def active(self) -> bool:
        """Whether to poll at all."""
        ...

    interval_s: float

    def poll(self, conn: Connection) -> None:
        """One poll, on the thread's connection outside any transaction."""
        ...


@dataclass(frozen=True, slots=True)
class BusyPolicy:
    """How long a lock is waited for: SQLite's busy timeout, then bounded retries with backoff."""

    timeout_ms: int = BUSY_TIMEOUT_MS
    retries: int = BUSY_RETRIES
    backoff_s: float = BUSY_BACKOFF_S


@dataclass(slots=True)
class _Call:
    work: Callable[[Connection], Any]
    write: bool
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | None


_NUDGE: Final = _Call(work=lambda _conn: None, write=False, loop=None, future=None)


def _answer(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class ConnectionThread:
    """A connection to `path`, opened and used on one daemon thread; `call` queues work for it."""

    def __init__(
        self,
        path: str,
        *,
        name: str,
        pragmas: Sequence[str],
        busy: BusyPolicy,
        idle: IdlePoll | None = None,
        driver: Driver = "sqlite3",
    ) -> None:
        self._path = path
        self._driver: Driver = driver
        self._pragmas = tuple(pragmas)
        self._busy = busy
        self._idle = idle
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._opened = threading.Event()
        self._open_error: BaseException | None = None
        self._closed = False
        self._exited: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Open the connection on the thread (its pragmas applied) and wait until it is."""
        loop = asyncio.get_running_loop()
        self._exited = loop.create_future()
        self._thread.start()
        await loop.run_in_executor(None, self._opened.wait)
        if self._open_error is not None:
            raise interpret_error(self._open_error) from self._open_error

    def call(self, work: Work[T], *, write: bool) -> asyncio.Future[T]:
        """Queue `work(conn)`: in `BEGIN IMMEDIATE` when it may write, in a read snapshot otherwise."""
        if self._closed:
            raise BackendClosedError("the SQLite backend is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put(_Call(work=work, write=write, loop=loop, future=future))
        return future

    def nudge(self) -> None:
        """Wake the thread so it reads its idle poll's state again."""
        self._calls.put(_NUDGE)

    async def close(self) -> None:
        """Run what is queued, close the connection and let the thread end (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._calls.put(None)
        if self._exited is not None and self._thread.is_alive():
            await asyncio.shield(self._exited)

    # -- the thread ----------------------------------------------------------------------------

    def _connect(self) -> Connection:
        conn = connect(self._path, self._driver, self._busy.timeout_ms / 1000)
        for pragma in self._pragmas:
            self._retried(_statement(pragma), conn, mode=None)
        return conn

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:  # answered by start()
            self._open_error = exc
            self._opened.set()
            self._finish()
            return
        self._opened.set()
        try:
            self._serve(conn)
        finally:
            conn.close()
            self._finish()

    def _finish(self) -> None:
        exited = self._exited
        if exited is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                exited.get_loop().call_soon_threadsafe(_answer, exited, None, None)

    def _serve(self, conn: Connection) -> None:
        idle = self._idle
        next_poll = 0.0
        while True:
            wait = idle.interval_s if idle is not None and idle.active else None
            try:
                call = self._calls.get(timeout=wait)
            except queue.Empty:
                call = _NUDGE
            if call is None:
                return
            if call.future is not None:
                self._answered(call, conn)
            if idle is not None and idle.active and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + idle.interval_s
                with contextlib.suppress(sqlite3.Error):  # a failed poll is the next one's: a hint
                    idle.poll(conn)

    def _answered(self, call: _Call, conn: Connection) -> None:
        future, loop = call.future, call.loop
        if future is None or loop is None or future.cancelled():
            return
        result: Any = None
        error: BaseException | None = None
        try:
            result = self._retried(
                call.work, conn, mode="begin immediate" if call.write else "begin"
            )
        except BaseException as exc:
            error = interpret_error(exc) if isinstance(exc, Exception) else exc
            if error is not exc:
                error.__cause__ = exc
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody waits
            loop.call_soon_threadsafe(_answer, future, result, error)

    def _retried(self, work: Work[T], conn: Connection, *, mode: str | None) -> T:
        """Run `work` in a transaction opened by `mode` (none: outside one), retrying a lock."""
        busy = self._busy
        attempt = 0
        while True:
            try:
                return _transaction(work, conn, mode)
            except sqlite3.OperationalError as exc:
                if not is_busy(exc):
                    raise
                if attempt >= busy.retries:
                    raise BackendUnavailableError(
                        f"SQLite {self._path} stayed locked by another connection after "
                        f"{attempt + 1} tries (a busy timeout of {busy.timeout_ms} ms each): {exc}"
                    ) from exc
            time.sleep(busy.backoff_s * 2**attempt)
            attempt += 1


def _statement(text: str) -> Work[list[Any]]:
    return lambda conn: conn.execute(text).fetchall()


def _transaction(work: Work[T], conn: Connection, mode: str | None) -> T:
    if mode is None:
        return work(conn)
    conn.execute(mode)
    try:
        result = work(conn)
        conn.execute("commit")
    except BaseException:
        if conn.in_transaction:
            conn.execute("rollback")
        raise
    return result
