"""The SQLite ceiling: the bare sqlite3 module, xjobs-sqlite's shape of claim and ack with nothing else.

One connection on one thread (WAL, `synchronous=NORMAL`, a busy timeout, as xjobs-sqlite runs
by default), every write in `BEGIN IMMEDIATE`: the claim is one `UPDATE … WHERE id IN (SELECT …
LIMIT n) RETURNING` that sets a lease, the settle one `UPDATE` of the batch's ids. An enqueue in
this process wakes the worker; no other wake, no lease renewal, no retries, no fence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

from bench.adapters.ceiling_worker import Claimed, batch_worker
from bench.contender import Contender, Engine, Target

T = TypeVar("T")
IDLE_WAIT_S = 1.0
LEASE_MS = 30_000
PRAGMAS = (
    "pragma busy_timeout = 30000",
    "pragma journal_mode = wal",
    "pragma synchronous = normal",
)
DDL = """
create table if not exists ceiling_jobs (
    id integer primary key,
    queue text not null,
    payload text not null,
    state integer not null default 0,
    run_at_ms integer not null,
    lease_until_ms integer
);
create index if not exists ceiling_jobs_due on ceiling_jobs (queue, run_at_ms, id) where state = 0
"""
ENQUEUE = "insert into ceiling_jobs (queue, payload, run_at_ms) values (?, ?, ?)"
CLAIM = """
update ceiling_jobs set state = 1, lease_until_ms = :now + :lease_ms
where id in (
    select id from ceiling_jobs
    where queue = :queue and state = 0 and run_at_ms <= :now
    order by run_at_ms, id
    limit :limit
)
returning id, payload
"""
SETTLE = "update ceiling_jobs set state = 2 where id in (select value from json_each(?))"
UNFINISHED = "select count(*) from ceiling_jobs where state < 2"
RESET = "delete from ceiling_jobs"


def _now_ms() -> int:
    return int(time.time() * 1000)


class CeilingSqlite(Contender):
    library = "ceiling"
    engine: ClassVar[Engine] = "sqlite"

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="ceiling-sqlite")
        self.woken = asyncio.Event()

    def version(self) -> str:
        return f"sqlite3 (SQLite {sqlite3.sqlite_version})"

    async def _on_thread(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn = self.conn
        assert conn is not None
        return await asyncio.get_running_loop().run_in_executor(self.thread, work, conn)

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute("begin immediate")
            try:
                result = work(conn)
            except BaseException:
                conn.execute("rollback")
                raise
            conn.execute("commit")
            return result

        return await self._on_thread(transaction)

    async def open(self, target: Target) -> None:
        path = urlsplit(target.url).path

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            for pragma in PRAGMAS:
                conn.execute(pragma)
            conn.executescript(DDL)
            return conn

        self.conn = await asyncio.get_running_loop().run_in_executor(self.thread, connect)

    async def close(self) -> None:
        if self.conn is not None:
            await self._on_thread(lambda conn: conn.close())
        self.thread.shutdown()

    async def reset(self) -> None:
        await self._write(lambda conn: conn.execute(RESET))

    async def enqueue(self, i: int, sent_at: float) -> None:
        payload = json.dumps({"i": i, "sent_at": sent_at})
        await self._write(lambda conn: conn.execute(ENQUEUE, (self.queue, payload, _now_ms())))
        self.woken.set()

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        now = _now_ms()
        rows = [(self.queue, json.dumps({"i": i, "sent_at": s}), now) for i, s in items]
        await self._write(lambda conn: conn.executemany(ENQUEUE, rows))
        self.woken.set()

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        self.woken = asyncio.Event()

        async def claim(limit: int) -> Claimed:
            self.woken.clear()
            params: dict[str, Any] = {
                "queue": self.queue,
                "now": _now_ms(),
                "lease_ms": LEASE_MS,
                "limit": limit,
            }
            rows = await self._write(lambda conn: conn.execute(CLAIM, params).fetchall())
            return [(row[0], row[1]) for row in rows]

        async def settle(ids: list[object]) -> None:
            await self._write(lambda conn: conn.execute(SETTLE, (json.dumps(ids),)))

        async def idle() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.woken.wait(), IDLE_WAIT_S)

        async with batch_worker(concurrency, claim, settle, idle):
            yield

    async def unfinished(self) -> int:
        row = await self._on_thread(lambda conn: conn.execute(UNFINISHED).fetchone())
        return int(row[0])
