"""procrastinate on Postgres through its psycopg connector: `defer_async`, `batch_defer_async`,
and an in-process worker from `App.run_worker_async`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import version
from typing import Any, ClassVar

import procrastinate
from procrastinate.tasks import Task
from procrastinate.types import JSONDict

from bench.contender import Contender, Engine, Target
from bench.probe import probe

TASK_NAME = "bench_job"
STOP_TIMEOUT_S = 5.0

UNFINISHED = (
    "select count(*) as n from procrastinate_jobs"
    " where queue_name = %(queue)s and status in ('todo', 'doing')"
    " and (scheduled_at is null or scheduled_at <= now())"
)
# events and periodic defers reference jobs, and events grow by a few rows per job
RESET = "truncate procrastinate_jobs, procrastinate_events, procrastinate_periodic_defers"
# W6: even rows succeeded, odd rows todo but scheduled a day ahead
FILL = """
insert into procrastinate_jobs (queue_name, task_name, args, status, scheduled_at)
select %(queue)s, %(task_name)s, jsonb_build_object('i', g, 'sent_at', 0),
       case when mod(g, 2) = 0 then 'succeeded' else 'todo' end::procrastinate_job_status,
       case when mod(g, 2) = 0 then null else now() + interval '1 day' end
from generate_series(1, %(n)s::int) as g
"""
ANALYZE = "analyze procrastinate_jobs"
REGISTER_WORKER = "insert into procrastinate_workers default values returning id"
EXPLAIN = "explain (analyze, costs off, timing off) "
# The statement inside procrastinate_fetch_job_v2 (procrastinate/sql/schema.sql), which the
# worker's `fetch_job` query calls; its plpgsql arguments become bound parameters.
CLAIM = """
WITH candidate AS (
    SELECT jobs.*
        FROM procrastinate_jobs AS jobs
        WHERE
            NOT EXISTS (
                SELECT 1
                    FROM procrastinate_jobs AS other_jobs
                    WHERE
                        jobs.lock IS NOT NULL
                        AND other_jobs.lock = jobs.lock
                        AND (
                            other_jobs.status = 'doing'
                            OR
                            (
                                other_jobs.status = 'todo'
                                AND (
                                    other_jobs.priority > jobs.priority
                                    OR (
                                    other_jobs.priority = jobs.priority
                                    AND other_jobs.id < jobs.id
                                    )
                                )
                            )
                        )
            )
            AND jobs.status = 'todo'
            AND (%(queues)s::varchar[] IS NULL OR jobs.queue_name = ANY( %(queues)s::varchar[] ))
            AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
        ORDER BY jobs.priority DESC, jobs.id ASC LIMIT 1
        FOR UPDATE OF jobs SKIP LOCKED
)
UPDATE procrastinate_jobs
    SET status = 'doing', worker_id = %(worker_id)s::bigint
    FROM candidate
    WHERE procrastinate_jobs.id = candidate.id
    RETURNING procrastinate_jobs.*
"""


async def bench_job(i: int, sent_at: float) -> None:
    probe.ran(i, sent_at)


class Procrastinate(Contender):
    """procrastinate 3 with `PsycopgConnector`; the worker listens on the bench queue only."""

    library = "procrastinate"
    engine: ClassVar[Engine] = "postgres"

    def __init__(self) -> None:
        self.app: procrastinate.App | None = None
        self.task: Task[..., Any, ...] | None = None

    def version(self) -> str:
        return version("procrastinate")

    async def open(self, target: Target) -> None:
        logging.getLogger("procrastinate").setLevel(logging.WARNING)
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=target.url))
        self.task = self.app.task(name=TASK_NAME, queue=self.queue)(bench_job)
        await self.app.open_async()
        await self.app.schema_manager.apply_schema_async()

    async def close(self) -> None:
        if self.app is not None:
            await self.app.close_async()

    def _app(self) -> procrastinate.App:
        assert self.app is not None
        return self.app

    def _task(self) -> Task[..., Any, ...]:
        assert self.task is not None
        return self.task

    def _connector(self) -> procrastinate.PsycopgConnector:
        connector = self._app().connector
        assert isinstance(connector, procrastinate.PsycopgConnector)
        return connector

    async def reset(self) -> None:
        await self._connector().execute_query_async(RESET)

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._task().defer_async(i=i, sent_at=sent_at)

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        kwargs: list[JSONDict] = [{"i": i, "sent_at": sent_at} for i, sent_at in items]
        await self._task().batch_defer_async(*kwargs)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        # install_signal_handlers=False: the worker is embedded in the bench process, which owns
        # SIGINT/SIGTERM; polling and LISTEN/NOTIFY wakeup (5 s fallback poll) are the defaults
        run = asyncio.create_task(
            self._app().run_worker_async(
                queues=[self.queue], concurrency=concurrency, install_signal_handlers=False
            )
        )
        try:
            yield
        finally:
            # cancelling run_worker_async is procrastinate's graceful stop: it stops fetching,
            # waits for running jobs, and unregisters the worker
            run.cancel()
            _, pending = await asyncio.wait({run}, timeout=STOP_TIMEOUT_S)
            if pending:
                run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run

    async def unfinished(self) -> int:
        row = await self._connector().execute_query_one_async(UNFINISHED, queue=self.queue)
        count: int = row["n"]
        return count

    async def fill(self, n: int) -> None:
        connector = self._connector()
        await connector.execute_query_async(FILL, queue=self.queue, task_name=TASK_NAME, n=n)
        await connector.execute_query_async(ANALYZE)

    async def explain_claim(self) -> str:
        # the claim is a write: analyzed inside a transaction that is rolled back, with a
        # worker registered in it so the claim's worker_id references a real row
        async with (
            self._connector().pool.connection() as conn,
            conn.transaction(force_rollback=True),
        ):
            registered = await (await conn.execute(REGISTER_WORKER)).fetchone()
            assert registered is not None
            cursor = await conn.execute(
                EXPLAIN + CLAIM, {"queues": [self.queue], "worker_id": registered[0]}
            )
            rows = await cursor.fetchall()
        return "\n".join(row[0] for row in rows)
