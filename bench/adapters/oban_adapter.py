"""The `oban` contender: Oban for Python (psycopg 3 on Postgres), one client instance enqueueing and
one server instance per `worker()` running the bench queue."""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator, Sequence

from oban import Oban as ObanInstance
from oban import job
from oban.schema import install
from oban.testing import reset_oban
from oban.worker import worker_name
from psycopg_pool import AsyncConnectionPool

from bench.contender import Contender, Target
from bench.probe import probe


@job(queue=Contender.queue)
def bench_job(i: int, sent_at: float) -> None:
    probe.ran(i, sent_at)


UNFINISHED_SQL = """
select count(*) from oban_jobs
where state not in ('completed', 'discarded', 'cancelled') and scheduled_at <= now()
"""

# W6: half completed, half scheduled a day ahead; timestamps are naive UTC like oban's own.
FILL_SQL = """
insert into oban_jobs (state, queue, worker, args, attempt, scheduled_at, attempted_at, completed_at)
select
    case when done then 'completed' else 'scheduled' end::oban_job_state,
    %(queue)s,
    %(worker)s,
    jsonb_build_object('i', g, 'sent_at', 0),
    case when done then 1 else 0 end,
    case when done then now_utc else now_utc + interval '1 day' end,
    case when done then now_utc end,
    case when done then now_utc end
from generate_series(1, %(n)s) as g,
    lateral (select mod(g, 2) = 0 as done, timezone('UTC', now()) as now_utc) as row_kind
"""

# oban/queries/fetch_jobs.sql of oban 0.7.0, verbatim: the producer's claim (`Query.fetch_jobs`).
FETCH_JOBS_SQL = """
WITH locked_jobs AS (
  SELECT
    priority, scheduled_at, id
  FROM
  oban_jobs
  WHERE
    state = 'available'
    AND queue = %(queue)s
  ORDER BY
    priority ASC, scheduled_at ASC, id ASC
  LIMIT
    %(demand)s
  FOR UPDATE SKIP LOCKED
)
UPDATE
  oban_jobs oj
SET
  attempt = oj.attempt + 1,
  attempted_at = timezone('UTC', now()),
  attempted_by = %(attempted_by)s,
  state = 'executing'
FROM
  locked_jobs
WHERE
  oj.id = locked_jobs.id
  AND oj.attempt < oj.max_attempts
RETURNING
  oj.id,
  oj.state,
  oj.queue,
  oj.worker,
  oj.attempt,
  oj.max_attempts,
  oj.priority,
  oj.args,
  oj.meta,
  oj.errors,
  oj.tags,
  oj.attempted_by,
  oj.inserted_at,
  oj.attempted_at,
  oj.cancelled_at,
  oj.completed_at,
  oj.discarded_at,
  oj.scheduled_at
"""


class Oban(Contender):
    library = "oban"
    engine = "postgres"

    def __init__(self) -> None:
        self._pool: AsyncConnectionPool | None = None
        self._client: ObanInstance | None = None

    def version(self) -> str:
        return importlib.metadata.version("oban")

    @property
    def pool(self) -> AsyncConnectionPool:
        assert self._pool is not None, "open() first"
        return self._pool

    @property
    def client(self) -> ObanInstance:
        assert self._client is not None, "open() first"
        return self._client

    async def open(self, target: Target) -> None:
        logging.getLogger("oban").setLevel(logging.WARNING)
        self._pool = await ObanInstance.create_pool(target.url)
        await install(self._pool)
        # Client mode (no queues): it only inserts, which needs nothing but the pool, so it is
        # never started; inserts notify the worker through `pg_notify` in the insert itself.
        self._client = ObanInstance(pool=self._pool)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        self._pool = None
        self._client = None

    async def reset(self) -> None:
        await reset_oban(self.client)

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self.client.enqueue(bench_job.new(i, sent_at))

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        await self.client.enqueue_many(bench_job.new(i, sent_at) for i, sent_at in items)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        server = ObanInstance(
            pool=self.pool,
            name="bench-worker",  # the client stays the registered default instance
            queues={self.queue: concurrency},
            # Non-default (15 s): stop() waits this long for running jobs, then cancels them.
            shutdown_grace_period=3.0,
        )
        await server.start()
        try:
            yield
        finally:
            await server.stop()

    async def unfinished(self) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(UNFINISHED_SQL)
            row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    async def fill(self, n: int) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(
                FILL_SQL, {"queue": self.queue, "worker": worker_name(bench_job), "n": n}
            )
            await conn.execute("analyze oban_jobs")

    async def explain_claim(self) -> str:
        params = {
            "queue": self.queue,
            "demand": 10,
            "attempted_by": ["bench-node", "00000000-0000-0000-0000-000000000000"],
        }
        async with self.pool.connection() as conn, conn.transaction(force_rollback=True):
            cur = await conn.execute("explain analyze " + FETCH_JOBS_SQL, params)
            rows = await cur.fetchall()
        return "\n".join(row[0] for row in rows)
