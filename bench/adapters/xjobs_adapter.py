"""xjobs on each of its backends: the public App API, with a storage count per backend for W3's end."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import version
from typing import Any, ClassVar

import asyncpg
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from bench.contender import Contender, Engine, Target
from bench.probe import probe
from bench.workloads import drain
from xjobs.memory.driver import MemoryJobDriver
from xjobs_pg.sql import Statements
from xjobs_redis.keys import Keys

SCHEMA = "xjobs"
QUEUE = "bench"
STEP_RUNS_QUEUE = "bench_steps"

UNFINISHED_PG = (
    "select count(*) from xjobs.jobs where queue = $1 and state in ('ready', 'running', 'waiting')"
    " and run_at_ms <= (extract(epoch from now()) * 1000)::bigint"
)
EXPLAIN = "explain (analyze, costs off, timing off) "
RESET_PG = "truncate xjobs.jobs, xjobs.steps, xjobs.slots, xjobs.workers"
# W6: half completed, half delayed a day, each with its own live-namespace key
FILL_PG = """
insert into xjobs.jobs (id, run_id, name, queue, idempotency_key, payload, state, run_at_ms,
                        max_attempts, created_at_ms, updated_at_ms, finished_at_ms)
select gen_random_uuid(), gen_random_uuid(), 'bench_job', 'bench', 'fill-' || g,
       jsonb_build_object('i', g, 'sent_at', 0),
       case when g % 2 = 0 then 'completed' else 'ready' end,
       now_ms + case when g % 2 = 0 then 0 else 86400000 end,
       3, now_ms, now_ms, case when g % 2 = 0 then now_ms end
from generate_series(1, $1::int) as g,
     (select (extract(epoch from now()) * 1000)::bigint as now_ms) as t
"""


class Numbered(BaseModel):
    i: int
    sent_at: float


@xjobs.job(tenant="none", idempotency_key=lambda p: str(p.i), queue=QUEUE)
async def bench_job(ctx: xjobs.JobContext, input: Numbered) -> None:
    probe.ran(input.i, input.sent_at)


yearly = xjobs.task(
    job=bench_job,
    cron="0 0 1 1 *",
    tz="UTC",
    input=lambda occurrence: Numbered(i=-1, sent_at=occurrence.timestamp()),
    name="bench.yearly",
)


def _noop() -> None:
    return None


@xjobs.job(tenant="none", idempotency_key=lambda p: str(p.i), queue=STEP_RUNS_QUEUE)
async def three_steps(ctx: xjobs.JobContext, input: Numbered) -> None:
    """W8: one durable three-step run; each step is a no-op whose result is recorded."""
    probe.ran(input.i, input.sent_at)
    for name in ("one", "two", "three"):
        await ctx.step.run(name, _noop)


class CountingSteps:
    """The backend's step store, counting each call by method (W8's writes and reads per run)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


class XJobs(Contender):
    """xjobs through `App`: `enqueue`, `enqueue_many`, and a worker from `App.worker`."""

    library = "xjobs"

    def __init__(self) -> None:
        self.app: xjobs.App | None = None
        self.serving = QUEUE  # the queue the worker serves: W8 switches it to the step runs'

    def version(self) -> str:
        return version("xjobs-core")

    async def open(self, target: Target) -> None:
        self.app = xjobs.App(backend=target.url, jobs=[bench_job, three_steps], tasks=[yearly])
        await self.app.open()

    async def close(self) -> None:
        if self.app is not None:
            await self.app.close()

    def _app(self) -> xjobs.App:
        assert self.app is not None
        return self.app

    async def enqueue(self, i: int, sent_at: float) -> None:
        await bench_job.enqueue(Numbered(i=i, sent_at=sent_at))

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        await self._app().enqueue_many(
            bench_job, [Numbered(i=i, sent_at=sent_at) for i, sent_at in items]
        )

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        worker = self._app().worker(queues=[self.serving], concurrency=concurrency)
        await worker.start()
        try:
            yield
        finally:
            await worker.stop()

    @contextlib.asynccontextmanager
    async def idle(self) -> AsyncIterator[None]:
        """W5: an idle worker and an idle scheduler leader, as a deployment runs them."""
        scheduler = self._app().scheduler()
        await scheduler.start()
        try:
            async with self.worker(10):
                yield
        finally:
            await scheduler.stop()

    async def steps(self, runs: int) -> dict[str, float]:
        """W8: `runs` three-step jobs through one worker; the step store calls per run."""
        app = self._app()
        counting = CountingSteps(app.backend.steps)
        app.backend.steps = counting
        await app.enqueue_many(three_steps, [Numbered(i=i, sent_at=0.0) for i in range(runs)])
        self.serving = STEP_RUNS_QUEUE
        try:
            _, elapsed = await drain(self, runs, 10)
        finally:
            self.serving = QUEUE
            app.backend.steps = counting.inner
        return {
            "runs_per_s": runs / elapsed,
            "step_writes_per_run": counting.calls["put"] / runs,
            "step_reads_per_run": counting.calls["list"] / runs,
        }

    async def unfinished(self) -> int:
        return await self._unfinished(self.serving)

    async def _unfinished(self, queue: str) -> int:
        raise NotImplementedError


class XJobsMemory(XJobs):
    engine: ClassVar[Engine] = "memory"

    async def reset(self) -> None:
        await self.close()
        await self.open(Target("memory", "memory://"))

    async def _unfinished(self, queue: str) -> int:
        # the memory driver keeps live jobs in process; its live namespace map is the count
        jobs = self._app().backend.jobs
        assert isinstance(jobs, MemoryJobDriver)
        return sum(1 for key in jobs._live if key[0] == queue_job(queue))


def queue_job(queue: str) -> str:
    """The job name served on `queue` in this bench."""
    return bench_job.name if queue == QUEUE else three_steps.name


class XJobsPostgres(XJobs):
    engine: ClassVar[Engine] = "postgres"

    def __init__(self) -> None:
        super().__init__()
        self.conn: asyncpg.Connection | None = None

    async def open(self, target: Target) -> None:
        await super().open(target)
        self.conn = await asyncpg.connect(target.url)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
        await super().close()

    async def reset(self) -> None:
        assert self.conn is not None
        await self.conn.execute(RESET_PG)

    async def _unfinished(self, queue: str) -> int:
        assert self.conn is not None
        count: int = await self.conn.fetchval(UNFINISHED_PG, queue)
        return count

    async def fill(self, n: int) -> None:
        assert self.conn is not None
        await self.conn.execute(FILL_PG, n)
        await self.conn.execute("analyze xjobs.jobs")

    async def explain_claim(self) -> str:
        assert self.conn is not None
        claim = Statements('"xjobs"')["claim"]
        # the claim is a write: analyzed inside a transaction that is rolled back
        transaction = self.conn.transaction()
        await transaction.start()
        try:
            args = (None, [QUEUE], [10], "bench-explain", 10, 30_000, None, "lapsed")
            rows = await self.conn.fetch(EXPLAIN + claim, *args)
        finally:
            await transaction.rollback()
        return "\n".join(row[0] for row in rows)


class XJobsRedis(XJobs):
    engine: ClassVar[Engine] = "redis"

    def __init__(self) -> None:
        super().__init__()
        self.redis: Redis | None = None
        self.keys = Keys("xjobs")

    async def open(self, target: Target) -> None:
        await super().open(target)
        self.redis = Redis.from_url(target.url)

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
        await super().close()

    async def reset(self) -> None:
        assert self.redis is not None
        await self.redis.flushdb()

    async def _unfinished(self, queue: str) -> int:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in (self.keys.ready(queue), self.keys.delayed(queue), self.keys.leased(queue)):
                pipe.zcard(key)
            counts = await pipe.execute()
        return sum(counts)
