"""Single calls on connections kept out of a driver's pool between them: a pool's acquire and
release cost more CPU than a small call itself (asyncpg's, redis-py's), so the hot paths skip it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

C = TypeVar("C")
T = TypeVar("T")

# A kept connection idle this long goes back to the pool, which closes it once idle for its own
# lifetime: a burst does not hold its connections for good.
IDLE_HAND_BACK_S = 60.0


class LanePool(Protocol[C]):
    """What lanes need of a driver's pool."""

    async def acquire(self) -> C:
        """A connection taken out of the pool."""
        ...

    async def release(self, conn: C, *, broken: bool) -> None:
        """Return `conn`; `broken`: a call on it failed midway, so its state is not known."""
        ...

    def usable(self, conn: C) -> bool:
        """Whether a kept idle connection can still run a call."""
        ...


class Lanes(Generic[C]):
    """Up to `keep` connections taken from `pool` once and kept, each running one call at a time;
    a call finding none free runs the pool's way (`pooled`) as before.

    A kept connection goes back to the pool when it is found unusable, when a call on it fails
    other than by an error in `kept_on` (the server's own error reply: the connection is idle and
    ready; anything else, a lost connection or a cancellation, leaves it in a state not known), when
    it sat idle `IDLE_HAND_BACK_S`, and at `close`. A call whose lane broke with an error in
    `fall_back_on` runs the pool's way once more, where the pool's own retry policy applies.
    """

    def __init__(
        self,
        pool: LanePool[C],
        keep: int,
        *,
        kept_on: tuple[type[BaseException], ...],
        fall_back_on: tuple[type[BaseException], ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._keep = keep
        self._kept_on = kept_on
        self._fall_back_on = fall_back_on
        self._clock = clock
        self._idle: list[tuple[C, float]] = []  # with when it went idle: the longest idle first
        self._kept = 0  # taken from the pool: idle or running a call
        self._closed = False

    @property
    def kept(self) -> int:
        """The connections taken from the pool and kept: idle, or running a call."""
        return self._kept

    async def run(self, call: Callable[[C], Awaitable[T]], pooled: Callable[[], Awaitable[T]]) -> T:
        """`call` on a kept connection, or `pooled()` when none is free."""
        conn = await self._take()  # a dial that fails has had the driver's own retries: it raises
        if conn is None:
            return await pooled()
        try:
            result = await call(conn)
        except self._kept_on:
            await self._put_back(conn)
            raise
        except self._fall_back_on:
            await self._hand_back(conn, broken=True)
            return await pooled()
        except BaseException:
            await self._hand_back(conn, broken=True)
            raise
        await self._put_back(conn)
        return result

    async def close(self) -> None:
        """Hand every idle kept connection back; one running a call goes back when it ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await self._hand_back(conn, broken=False)

    async def _take(self) -> C | None:
        while self._idle:
            conn, _ = self._idle.pop()
            if self._pool.usable(conn):
                return conn
            await self._hand_back(conn, broken=True)
        if self._closed or self._kept >= self._keep:
            return None
        self._kept += 1
        try:
            return await self._pool.acquire()
        except BaseException:
            self._kept -= 1
            raise

    async def _put_back(self, conn: C) -> None:
        if self._closed:
            await self._hand_back(conn, broken=False)
            return
        now = self._clock()
        self._idle.append((conn, now))
        if now - self._idle[0][1] > IDLE_HAND_BACK_S:
            stale, _ = self._idle.pop(0)
            await self._hand_back(stale, broken=False)

    async def _hand_back(self, conn: C, *, broken: bool) -> None:
        self._kept -= 1
        await self._pool.release(conn, broken=broken)
