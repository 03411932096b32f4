"""pgqueuer on Postgres through asyncpg: `Queries.enqueue` (scalar and list forms) and an
in-process `QueueManager` worker on a connection of its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from importlib.metadata import version
from typing import ClassVar

import asyncpg
from pgqueuer import Job, Queries, QueueManager
from pgqueuer.domain.types import QueueEntrypoint, QueueManagerId

from bench.contender import Contender, Engine, Target
from bench.probe import probe

ENTRYPOINT = "bench_job"
STOP_TIMEOUT_S = 5.0
HEARTBEAT_TIMEOUT = timedelta(seconds=30)  # QueueManager.run's default

# finished jobs are deleted from the queue table (and logged), so what remains is unfinished
UNFINISHED = "select count(*) as n from pgqueuer where entrypoint = $1 and execute_after <= now()"
RESET = "truncate pgqueuer, pgqueuer_log, pgqueuer_statistics"
# W6: pgqueuer keeps no finished rows in its queue table, so every row is queued a day ahead
FILL = """
insert into pgqueuer (priority, entrypoint, payload, status, execute_after)
select 0, $2, convert_to(json_build_object('i', g, 'sent_at', 0)::text, 'UTF8'),
       'queued', now() + interval '1 day'
from generate_series(1, $1::int) as g
"""
ANALYZE = "analyze pgqueuer"
EXPLAIN = "explain (analyze, costs off, timing off) "


def payload(i: int, sent_at: float) -> bytes:
    return json.dumps({"i": i, "sent_at": sent_at}).encode()


async def bench_job(job: Job) -> None:
    assert job.payload is not None
    args = json.loads(job.payload)
    probe.ran(args["i"], args["sent_at"])


def run_settings(concurrency: int) -> tuple[int, int]:
    """(batch_size, max_concurrent_tasks) for `concurrency` jobs at once.

    By default a QueueManager has no cap on running jobs; max_concurrent_tasks is that cap, and
    pgqueuer requires it to be at least twice batch_size, so the batch is the largest allowed.
    """
    return max(1, concurrency // 2), concurrency


class PGQueuer(Contender):
    """pgqueuer with its asyncpg driver: one connection enqueues, each worker has its own."""

    library = "pgqueuer"
    engine: ClassVar[Engine] = "postgres"

    def __init__(self) -> None:
        self.url = ""
        self.conn: asyncpg.Connection | None = None
        self.queries: Queries | None = None

    def version(self) -> str:
        return version("pgqueuer")

    async def open(self, target: Target) -> None:
        logging.getLogger("pgqueuer").setLevel(logging.WARNING)
        self.url = target.url
        self.conn = await asyncpg.connect(target.url)
        self.queries = Queries.from_asyncpg_connection(self.conn)
        await self.queries.install()

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()

    def _conn(self) -> asyncpg.Connection:
        assert self.conn is not None
        return self.conn

    def _queries(self) -> Queries:
        assert self.queries is not None
        return self.queries

    async def reset(self) -> None:
        await self._queries().driver.execute(RESET)

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._queries().enqueue(ENTRYPOINT, payload(i, sent_at))

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        await self._queries().enqueue(
            [ENTRYPOINT] * len(items),
            [payload(i, sent_at) for i, sent_at in items],
            [0] * len(items),
        )

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        # a bare QueueManager, as pgqueuer's jobs-only examples run it: PgQueuer would add a
        # SchedulerManager that, with no schedules, polls its table every second
        conn = await asyncpg.connect(self.url)
        qm = QueueManager(Queries.from_asyncpg_connection(conn))
        qm.entrypoint(ENTRYPOINT)(bench_job)
        batch_size, max_concurrent_tasks = run_settings(concurrency)
        run = asyncio.create_task(
            qm.run(batch_size=batch_size, max_concurrent_tasks=max_concurrent_tasks)
        )
        try:
            yield
        finally:
            # setting shutdown is pgqueuer's graceful stop: running jobs finish, buffers flush
            qm.shutdown.set()
            _, pending = await asyncio.wait({run}, timeout=STOP_TIMEOUT_S)
            if pending:
                run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
            await conn.close()

    async def unfinished(self) -> int:
        (row,) = await self._queries().driver.fetch(UNFINISHED, ENTRYPOINT)
        count = row["n"]
        assert isinstance(count, int)
        return count

    async def fill(self, n: int) -> None:
        driver = self._queries().driver
        await driver.execute(FILL, n, ENTRYPOINT)
        await driver.execute(ANALYZE)

    async def explain_claim(self) -> str:
        # the dequeue statement as the library composes it for worker(10)
        batch_size, max_concurrent_tasks = run_settings(10)
        claim = self._queries().qbq.build_dequeue_query(
            batch_size=batch_size,
            entrypoints=[QueueEntrypoint(ENTRYPOINT)],
            concurrency_limits=[0],
            queue_manager_id=QueueManagerId(uuid.uuid4()),
            global_concurrency_limit=max_concurrent_tasks,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
        )
        # the claim is a write: analyzed inside a transaction that is rolled back
        conn = self._conn()
        transaction = conn.transaction()
        await transaction.start()
        try:
            rows = await conn.fetch(EXPLAIN + claim.sql, *claim.args)
        finally:
            await transaction.rollback()
        return "\n".join(row[0] for row in rows)
