"""Single statements on connections kept out of the pool between them: asyncpg's `Pool.fetch`
spends some 40 µs of CPU a call acquiring and releasing (a shielded task, a timeout scope)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import asyncpg

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = PoolConnectionProxy[Any]  # generic in the stubs only

T = TypeVar("T")

# A kept connection idle this long goes back to the pool, which closes it once idle for its own
# `max_inactive_connection_lifetime`: a burst does not hold its connections for good.
IDLE_HAND_BACK_S = 60.0


class Lanes:
    """Up to `keep` connections acquired from `pool` once and kept, each running one autocommit
    statement at a time; a statement finding none free runs on the pool as before.

    A kept connection goes back to the pool (which replaces a broken one) when it is found closed,
    when a statement on it fails other than by a server error (a lost connection, a cancellation:
    its state is not known), when it sat idle `IDLE_HAND_BACK_S`, and at `close`. A server error
    leaves it idle and ready, so it is kept.
    """

    def __init__(
        self, pool: asyncpg.Pool, keep: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._pool = pool
        self._keep = keep
        self._clock = clock
        self._idle: list[tuple[Conn, float]] = []  # with when it went idle: the longest idle first
        self._kept = 0  # acquired from the pool: idle or running a statement
        self._closed = False

    @property
    def kept(self) -> int:
        """The connections taken from the pool and kept: idle, or running a statement."""
        return self._kept

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        return await self._run(lambda conn: conn.fetch(query, *args))

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        return await self._run(lambda conn: conn.fetchrow(query, *args))

    async def execute(self, query: str, *args: object) -> str:
        return await self._run(lambda conn: conn.execute(query, *args))

    async def close(self) -> None:
        """Hand every idle kept connection back; one running a statement goes back when it ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await self._hand_back(conn)

    async def _run(self, statement: Callable[[Conn], Awaitable[T]]) -> T:
        conn = await self._take()
        if conn is None:
            async with self._pool.acquire() as pooled:
                return await statement(pooled)
        try:
            result = await statement(conn)
        except asyncpg.PostgresError:
            await self._put_back(conn)
            raise
        except BaseException:
            await self._hand_back(conn)
            raise
        await self._put_back(conn)
        return result

    async def _take(self) -> Conn | None:
        while self._idle:
            conn, _ = self._idle.pop()
            if _usable(conn):
                return conn
            await self._hand_back(conn)
        if self._closed or self._kept >= self._keep:
            return None
        self._kept += 1
        try:
            return await self._pool.acquire()
        except BaseException:
            self._kept -= 1
            raise

    async def _put_back(self, conn: Conn) -> None:
        if self._closed:
            await self._hand_back(conn)
            return
        now = self._clock()
        self._idle.append((conn, now))
        if now - self._idle[0][1] > IDLE_HAND_BACK_S:
            stale, _ = self._idle.pop(0)
            await self._hand_back(stale)

    async def _hand_back(self, conn: Conn) -> None:
        self._kept -= 1
        await self._pool.release(conn)


def _usable(conn: Conn) -> bool:
    """Whether a kept connection can run a statement: one whose socket closed is reclaimed by the
    pool at once (its proxy then answers nothing; handing it back again is a no-op)."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False
