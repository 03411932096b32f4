"""Single statements on lanes (`xjobs.lanes`), connections kept out of the asyncpg pool between
them: `Pool.fetch` spends some 40 µs of CPU a call acquiring and releasing (a shielded task, a
timeout scope)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from xjobs.lanes import IDLE_HAND_BACK_S
from xjobs.lanes import Lanes as KeptLanes

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn: TypeAlias = PoolConnectionProxy[Any]  # generic in the stubs only

__all__ = ["IDLE_HAND_BACK_S", "Lanes"]


class _Pool:
    """An asyncpg pool as lanes take from it; the pool itself resets or replaces what it gets back."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def acquire(self) -> Conn:
        return await self._pool.acquire()

    async def release(self, conn: Conn, *, broken: bool) -> None:
        await self._pool.release(conn)

    def usable(self, conn: Conn) -> bool:
        """One whose socket closed is reclaimed by the pool at once (its proxy then answers
        nothing; handing it back again is a no-op)."""
        try:
            return not conn.is_closed()
        except asyncpg.InterfaceError:
            return False


class Lanes:
    """Up to `keep` kept connections, each running one autocommit statement at a time; a server
    error leaves its connection idle and ready, so it is kept (see `xjobs.lanes.Lanes`)."""

    def __init__(
        self, pool: asyncpg.Pool, keep: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._pool = pool
        self._lanes: KeptLanes[Conn] = KeptLanes(
            _Pool(pool), keep, kept_on=(asyncpg.PostgresError,), clock=clock
        )

    @property
    def kept(self) -> int:
        """The connections taken from the pool and kept: idle, or running a statement."""
        return self._lanes.kept

    async def fetch(self, query: str, *args: object) -> list[asyncpg.Record]:
        return await self._lanes.run(
            lambda conn: conn.fetch(query, *args), lambda: self._pool.fetch(query, *args)
        )

    async def fetchrow(self, query: str, *args: object) -> asyncpg.Record | None:
        return await self._lanes.run(
            lambda conn: conn.fetchrow(query, *args), lambda: self._pool.fetchrow(query, *args)
        )

    async def execute(self, query: str, *args: object) -> str:
        return await self._lanes.run(
            lambda conn: conn.execute(query, *args), lambda: self._pool.execute(query, *args)
        )

    async def close(self) -> None:
        """Hand every idle kept connection back; one running a statement goes back when it ends."""
        await self._lanes.close()
