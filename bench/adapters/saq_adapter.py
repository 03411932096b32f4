"""saq 0.26 on Postgres (its PostgresQueue over psycopg) and on Redis (its RedisQueue)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import time
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from saq import Worker
from saq.queue.postgres import PostgresQueue
from saq.queue.redis import RedisQueue
from saq.types import Context

from bench.contender import Contender, Target
from bench.probe import probe

STOP_TIMEOUT_S = 5.0
DAY_S = 86_400
# W6 rows are keyed under this prefix, so `unfinished` counts only the jobs the workloads enqueue.
FILL_KEY_PREFIX = "fill:"
# saq hands its claim statement `limit` = the worker tasks waiting; 10 is saq's default concurrency.
CLAIM_LIMIT = 10

RESET_SQL = "TRUNCATE saq_jobs, saq_stats RESTART IDENTITY"
UNFINISHED_SQL = (
    "SELECT count(*) FROM saq_jobs WHERE status <> 'complete' AND NOT starts_with(key, %(fill)s)"
)
# Even g: completed (kept a day, as saq keeps finished jobs for their ttl); odd g: queued a day ahead.
FILL_SQL = """
INSERT INTO saq_jobs (key, job, queue, status, scheduled, expire_at)
SELECT f.key,
       convert_to(json_build_object(
         'function', 'bench_job', 'kwargs', json_build_object('i', g, 'sent_at', 0),
         'queue', %(queue)s::text, 'key', f.key, 'status', f.status, 'scheduled', f.scheduled
       )::text, 'UTF8'),
       %(queue)s, f.status, f.scheduled, f.expire_at
FROM generate_series(1, %(n)s) AS g,
LATERAL (
  SELECT %(fill)s || g AS key,
         CASE WHEN g %% 2 = 0 THEN 'complete' ELSE 'queued' END AS status,
         %(now)s + CASE WHEN g %% 2 = 0 THEN 0 ELSE %(day)s END AS scheduled,
         CASE WHEN g %% 2 = 0 THEN %(now)s + %(day)s END AS expire_at
) AS f
"""
# PostgresQueue._dequeue's statement, copied from saq 0.26.4 with {jobs_table} = saq_jobs.
CLAIM_SQL = """
WITH locked_job AS (
  SELECT key
  FROM saq_jobs
  WHERE status = 'queued'
    AND queue = %(queue)s
    AND %(now)s >= scheduled
    AND priority BETWEEN %(plow)s AND %(phigh)s
    AND group_key NOT IN (
      SELECT DISTINCT group_key
      FROM saq_jobs
      WHERE status = 'active'
        AND queue = %(queue)s
        AND group_key IS NOT NULL
    )
  ORDER BY priority, scheduled
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
)
UPDATE saq_jobs SET status = 'active'
FROM locked_job
WHERE saq_jobs.key = locked_job.key
RETURNING job
"""


async def bench_job(ctx: Context, i: int, sent_at: float) -> None:
    probe.ran(i, sent_at)


async def bench_answer(ctx: Context, i: int, sent_at: float) -> int:
    """W10: a job whose body returns a small value (its number) for the enqueuer to await."""
    probe.ran(i, sent_at)
    return i


Q = TypeVar("Q", PostgresQueue, RedisQueue)


class _Saq(Contender, Generic[Q]):
    """What both saq queues share: one queue object enqueues, and the in-process worker uses it.

    saq has no bulk enqueue (`Queue.map` gathers single enqueues, then waits for the results), so
    `enqueue_bulk` stays `Unsupported`. W10 is `Queue.apply` with saq's defaults: on both
    queues it reads the job every poll interval (0.5 s) and, in saq 0.26, sleeps one interval
    more after the read that finds the result (`Queue.map`), so a round trip takes about 1 s.
    """

    library = "saq"
    results = True
    _queue: Q

    def _new_queue(self, url: str) -> Q:
        raise NotImplementedError

    def version(self) -> str:
        return importlib.metadata.version("saq")

    async def open(self, target: Target) -> None:
        logging.getLogger("saq").setLevel(logging.WARNING)
        self._queue = self._new_queue(target.url)
        await self._queue.connect()

    async def close(self) -> None:
        await self._queue.disconnect()

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._queue.enqueue("bench_job", i=i, sent_at=sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        return await self._queue.apply("bench_answer", timeout=timeout_s, i=i, sent_at=sent_at)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        worker = Worker(self._queue, functions=[bench_job, bench_answer], concurrency=concurrency)
        # saq has no handle_signals switch like arq's: leave SIGINT/SIGTERM to the harness.
        worker.SIGNALS = []
        task = asyncio.create_task(worker.start())
        try:
            yield
        finally:
            # saq's default shutdown grace of 0 s cancels at once whatever still runs (and logs a
            # warning saying so on every stop, idle dequeue tasks included)
            await worker.stop()
            await asyncio.wait_for(task, STOP_TIMEOUT_S)


class SaqPostgres(_Saq[PostgresQueue]):
    engine = "postgres"

    def _new_queue(self, url: str) -> PostgresQueue:
        return PostgresQueue.from_url(url, name=self.queue)

    async def reset(self) -> None:
        async with self._queue.pool.connection() as conn:
            await conn.execute(RESET_SQL)

    async def unfinished(self) -> int:
        async with self._queue.pool.connection() as conn:
            cursor = await conn.execute(UNFINISHED_SQL, {"fill": FILL_KEY_PREFIX})
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def fill(self, n: int) -> None:
        params = {
            "queue": self.queue,
            "n": n,
            "fill": FILL_KEY_PREFIX,
            "now": int(time.time()),
            "day": DAY_S,
        }
        async with self._queue.pool.connection() as conn:
            await conn.execute(FILL_SQL, params)
            await conn.execute("ANALYZE saq_jobs")

    async def explain_claim(self) -> str:
        plow, phigh = self._queue._priorities
        params = {
            "queue": self.queue,
            "now": time.time(),
            "limit": CLAIM_LIMIT,
            "plow": plow,
            "phigh": phigh,
        }
        async with (
            self._queue.pool.connection() as conn,
            conn.transaction(force_rollback=True),
        ):
            cursor = await conn.execute("EXPLAIN ANALYZE " + CLAIM_SQL, params)
            rows = await cursor.fetchall()
        return "\n".join(str(row[0]) for row in rows)


class SaqRedis(_Saq[RedisQueue]):
    engine = "redis"

    def _new_queue(self, url: str) -> RedisQueue:
        return RedisQueue.from_url(url, name=self.queue)

    async def reset(self) -> None:
        await self._queue.redis.flushdb()

    async def unfinished(self) -> int:
        # The `incomplete` zset holds every job from enqueue until finish, queued, active or scheduled.
        return int(await self._queue.count("incomplete"))
