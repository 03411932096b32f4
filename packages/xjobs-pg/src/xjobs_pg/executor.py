"""How the stores reach Postgres: one pool (single statements on its kept lanes), named statements, the clock parameter, errors translated."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from xjobs.clock import Clock, is_system_clock
from xjobs_pg.errors import interpret_error
from xjobs_pg.lanes import Lanes
from xjobs_pg.params import NO_PARAMS, Params
from xjobs_pg.sql import Statements


class Executor:
    """Runs named statements on the pool, each bound from its params record, translating engine errors.

    Statements that read the time take `now()` as `$1`: null makes the statement read the server's
    clock, so leases never depend on a worker's clock; a test clock passes its reading instead.
    """

    def __init__(self, pool: asyncpg.Pool, statements: Statements, clock: Clock) -> None:
        self.pool = pool
        # half the pool at most: transactions and the pool's own single statements keep the rest
        self.lanes = Lanes(pool, keep=pool.get_max_size() // 2)
        self.sql = statements
        self._clock = clock
        self._server_time = is_system_clock(clock)

    async def close(self) -> None:
        """Hand the kept connections back, then close the pool (which waits for every one)."""
        await self.lanes.close()
        await self.pool.close()

    def now(self) -> int | None:
        return None if self._server_time else self._clock.now_ms()

    async def fetch(self, name: str, params: Params = NO_PARAMS) -> list[asyncpg.Record]:
        try:
            return await self.lanes.fetch(self.sql[name], *params.bind())
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def fetchrow(self, name: str, params: Params = NO_PARAMS) -> asyncpg.Record | None:
        try:
            return await self.lanes.fetchrow(self.sql[name], *params.bind())
        except Exception as exc:
            raise interpret_error(exc) from exc

    async def landed(self, name: str, params: Params) -> bool:
        """Run a settle that answers `landed`, the count of rows its fence let through (0 or 1)."""
        row = await self.fetchrow(name, params)
        return row is not None and row["landed"] == 1

    async def execute(self, name: str, params: Params = NO_PARAMS) -> int:
        """Run a statement; answers how many rows it touched."""
        try:
            status = await self.lanes.execute(self.sql[name], *params.bind())
        except Exception as exc:
            raise interpret_error(exc) from exc
        return rows_touched(status)

    async def fetch_by_index(self, name: str, params: Params) -> list[asyncpg.Record]:
        """Run a read that counts to a cap with bitmap scans off (`index_scans_only`): each scan
        is then an index scan that stops at its limit, whatever the planner estimates."""
        rows = await self.in_transaction([("index_scans_only", NO_PARAMS), (name, params)])
        return rows[1]

    async def in_transaction(
        self, statements: Sequence[tuple[str, Params]]
    ) -> list[list[asyncpg.Record]]:
        """Run statements in one transaction on one connection; answers each one's rows."""
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                return [await conn.fetch(self.sql[name], *p.bind()) for name, p in statements]
        except Exception as exc:
            raise interpret_error(exc) from exc


def rows_touched(status: str) -> int:
    """The row count of a command tag such as `UPDATE 1` or `INSERT 0 1`."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0
