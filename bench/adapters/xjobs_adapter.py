"""xjobs on each of its backends: the public App API, with a storage count per backend for W3's end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
from pydantic import BaseModel
from redis.asyncio import Redis

import xjobs
from bench.contender import NOT_YET, Contender, Engine, Read, Target, Unsupported
from bench.probe import probe
from bench.workloads import drain
from xjobs.contract.driver import JOB_STATES
from xjobs.contract.introspection import COUNT_CAP, JobFilter, JobPosition
from xjobs.contract.retention import Retention
from xjobs.memory.driver import MemoryJobDriver
from xjobs.memory.rows import JobRow
from xjobs.operate.cursor import decode_cursor
from xjobs_pg.operator_params import ListParams, QueueCountsParams
from xjobs_pg.params import Bound
from xjobs_pg.sql import Statements
from xjobs_redis.keys import Keys

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

SCHEMA = "xjobs"
QUEUE = "bench"
STEP_RUNS_QUEUE = "bench_steps"

# The due jobs not yet finished, each state read through the index the claim uses (the claimable
# rows, then the leased ones), so the count costs W6's window nothing its fill adds: one filter
# over every live row made it a sequential scan of the filled table, half of W6's window at n=2,000.
UNFINISHED_PG = (
    "select (select count(*) from xjobs.jobs where queue = $1 and state in ('ready', 'waiting')"
    " and run_at_ms <= (extract(epoch from now()) * 1000)::bigint)"
    " + (select count(*) from xjobs.jobs where queue = $1 and state = 'running')"
)
EXPLAIN = "explain (analyze, costs off, timing off) "
EXPLAIN_READ = "explain (analyze, buffers, timing off) "
RESET_PG = "truncate xjobs.jobs, xjobs.steps, xjobs.slots, xjobs.workers"
DAY_MS = 86_400_000
# W6 and WOP: half completed, half delayed a day, each with its own live-namespace key
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


# W9: completed rows over eight job names, finished two weeks and a day ago (past every default
# keep, so a pass with the default policy removes them all)
FILL_FINISHED_PG = """
insert into xjobs.jobs (id, run_id, name, queue, idempotency_key, payload, state, run_at_ms,
                        attempt, max_attempts, claims, created_at_ms, updated_at_ms,
                        finished_at_ms)
select gen_random_uuid(), gen_random_uuid(), 'old_' || (g % 8), 'old', 'old-' || g, '{}',
       'completed', t.at_ms, 1, 3, 1, t.at_ms, t.at_ms, t.at_ms + (g % 1000)
from generate_series(1, $1::int) as g,
     (select (extract(epoch from now()) * 1000)::bigint - 15 * 86400000 as at_ms) as t
"""
# W6 after a purge: a policy that keeps no finished job (a millisecond), as production's purge
# leaves a table whose finished rows are past their keep
KEEP_NONE = Retention(
    completed=timedelta(milliseconds=1),
    cancelled=timedelta(milliseconds=1),
    failed=timedelta(milliseconds=1),
    dead=timedelta(milliseconds=1),
)


FILL_CHUNK = 1000  # Redis: rows per pipelined round trip of the fill
# WOP: the live rows are enqueued in calls of BULK; the store of the own rows alone is the
# schema (Postgres) or key prefix (Redis) ALONE beside the bench's; the filters of the reads
BULK = 500
DEAD_WAIT_S = 60.0
ALONE = "xjobs_alone"
EVERY_JOB = JobFilter()
DEAD_IN_QUEUE = JobFilter(states=("dead",), queue=QUEUE)


class Numbered(BaseModel):
    i: int
    sent_at: float


@xjobs.job(tenant="none", idempotency_key=lambda p: str(p.i), queue=QUEUE)
async def bench_job(ctx: xjobs.JobContext, input: Numbered) -> None:
    probe.ran(input.i, input.sent_at)


@xjobs.job(tenant="none", idempotency_key=lambda p: f"answer-{p.i}", queue=QUEUE)
async def bench_answer(ctx: xjobs.JobContext, input: Numbered) -> int:
    """W10: a job whose body returns a small value (its number) for the enqueuer to await."""
    probe.ran(input.i, input.sent_at)
    return input.i


class Doomed(RuntimeError):
    """What `bench_dies` raises: WOP's dead rows carry it as their error."""


@xjobs.job(
    tenant="none", idempotency_key=lambda p: str(p.i), queue=QUEUE, retry=xjobs.Retry(attempts=1)
)
async def bench_dies(ctx: xjobs.JobContext, input: Numbered) -> None:
    """WOP: a job whose one attempt fails, so it is dead-lettered."""
    raise Doomed(f"bench job {input.i} dies on purpose")


# WOP: the App of the own rows alone has handles of its own, under the same names, so opening
# and closing it leaves the bench's handles bound to the bench's App
alone_job = xjobs.job(
    bench_job.fn, tenant="none", idempotency_key=lambda p: str(p.i), queue=QUEUE, name="bench_job"
)
alone_dies = xjobs.job(
    bench_dies.fn,
    tenant="none",
    idempotency_key=lambda p: str(p.i),
    queue=QUEUE,
    retry=xjobs.Retry(attempts=1),
    name="bench_dies",
)


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
    results = True  # on a backend without the results capability, W10 answers Unsupported

    def __init__(self) -> None:
        self.app: xjobs.App | None = None
        self.serving = QUEUE  # the queue the worker serves: W8 switches it to the step runs'
        self.global_rate: xjobs.Rate | None = None  # W3c10rate: the worker's fleet rate limit
        self.url = ""
        self.alone: xjobs.App | None = None  # WOP: the store of the operator's own rows alone
        self.deep_cursor = ""  # WOP: where the deep page of the bench's store starts
        self.page = 0  # WOP: the size of a page

    def version(self) -> str:
        return version("xjobs-core")

    async def open(self, target: Target) -> None:
        self.url = target.url
        self.app = xjobs.App(
            backend=target.url,
            jobs=[bench_job, three_steps, bench_dies, bench_answer],
            tasks=[yearly],
            # W5 counts the idle roles' own statements and W9 times a purge of its own: the
            # default purge task would fire beside them every five minutes and poll `default`
            retention=None,
        )
        await self.app.open()

    async def close(self) -> None:
        await self._close_alone()
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

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        if self._app().backend.results is None:
            name = self._app().backend.name
            raise Unsupported(f"the {name} backend stores no job results (results) yet")
        enqueued = await bench_answer.enqueue(Numbered(i=i, sent_at=sent_at))
        answer: object = await enqueued.result(timeout=timedelta(seconds=timeout_s))
        return answer

    async def fan_out(self, children: int, timeout_s: float) -> None:
        raise Unsupported(f"{NOT_YET}: a parent that waits for its children comes with workflows")

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        worker = self._app().worker(
            queues=[self.serving], concurrency=concurrency, global_rate=self.global_rate
        )
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
            _, window = await drain(self, runs, 10)
        finally:
            self.serving = QUEUE
            app.backend.steps = counting.inner
        return {
            "runs_per_s": runs / window.seconds,
            "step_writes_per_run": counting.calls["put"] / runs,
            "step_reads_per_run": counting.calls["list"] / runs,
            **window.per_1k(runs),
        }

    async def unfinished(self) -> int:
        return await self._unfinished(self.serving)

    async def _unfinished(self, queue: str) -> int:
        raise NotImplementedError

    async def seed_operator(self, live: int, dead: int) -> None:
        """WOP: the own rows in the bench's store and in the store beside it (another App)."""
        if self._app().backend.introspection is None:
            name = self._app().backend.name
            raise Unsupported(f"the {name} backend has no operator surface (introspection) yet")
        await self._close_alone()
        await self._clear_alone()
        self.alone = xjobs.App(backend=self._alone_url(), jobs=[alone_job, alone_dies])
        await self.alone.open()
        await seed(self.alone, alone_job, alone_dies, live, dead)
        await seed(self._app(), bench_job, bench_dies, live, dead)

    async def operator_reads(self, page: int, deep: int) -> dict[str, tuple[Read, Read]]:
        assert self.alone is not None
        alone, _ = await operator_reads(self.alone.operator, page, deep)
        beside, self.deep_cursor = await operator_reads(self._app().operator, page, deep)
        self.page = page
        return {name: (alone[name], beside[name]) for name in beside}

    def _alone_url(self) -> str:
        """WOP: where the store of the own rows alone is."""
        raise NotImplementedError

    async def _clear_alone(self) -> None:
        """WOP: empty the store of the own rows alone before it is seeded."""

    async def _close_alone(self) -> None:
        if self.alone is not None:
            await self.alone.close()
            self.alone = None


async def seed(
    app: xjobs.App, job: xjobs.JobHandle[Any], dies: xjobs.JobHandle[Any], live: int, dead: int
) -> None:
    """WOP: `live` jobs a day ahead, then `dead` jobs a worker runs once each and buries."""
    for k in range(0, live, BULK):
        inputs = [Numbered(i=i, sent_at=0.0) for i in range(k, min(k + BULK, live))]
        await app.enqueue_many(job, inputs, delay=timedelta(days=1))
    await app.enqueue_many(dies, [Numbered(i=i, sent_at=0.0) for i in range(dead)])
    quiet = logging.getLogger("xjobs")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a traceback a death is what the bench asked for
    worker = app.worker(queues=[QUEUE], concurrency=10)
    await worker.start()
    try:
        async with asyncio.timeout(DEAD_WAIT_S):
            while sum(q.dead for q in await app.operator.queues() if q.queue == QUEUE) < dead:  # noqa: ASYNC110 - storage is polled, it has no event
                await asyncio.sleep(0.02)
    finally:
        await worker.stop()
        quiet.setLevel(level)


async def operator_reads(
    operator: xjobs.Operator, page: int, deep: int
) -> tuple[dict[str, Read], str]:
    """WOP: the four reads on one store, and the cursor the deep page starts after."""
    ends_deep = await operator.list_jobs(EVERY_JOB, limit=deep)
    if ends_deep.cursor is None:
        raise RuntimeError(f"WOP: fewer than {deep + 1} jobs to page past")
    cursor = ends_deep.cursor

    def listed(where: JobFilter, after: str | None) -> Read:
        async def read() -> tuple[str, ...]:
            found = await operator.list_jobs(where, limit=page, after=after)
            return tuple(job.id for job in found.jobs)

        return read

    async def counts() -> tuple[str, ...]:
        return tuple(
            f"{q.queue}: ready {q.ready}, scheduled {q.scheduled}, running {q.running}, "
            f"dead {q.dead}"
            for q in await operator.queues()
        )

    reads = {
        "first": listed(EVERY_JOB, None),
        "dead": listed(DEAD_IN_QUEUE, None),
        "deep": listed(EVERY_JOB, cursor),
        "queues": counts,
    }
    return reads, cursor


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

    def _alone_url(self) -> str:
        return "memory://"  # an App of its own: a store of its own

    async def fill(self, n: int) -> None:
        """W6's fill in the memory store: each row put in the driver's dict and indexed by the
        driver's own bookkeeping, as an enqueue and a settle leave it (never `n` enqueues)."""
        jobs = self._app().backend.jobs
        assert isinstance(jobs, MemoryJobDriver)
        now = self._app().clock.now_ms()
        ids, run_ids = fill_ids(), fill_ids()
        for g in range(1, n + 1):
            done = g % 2 == 0
            row = JobRow(
                id=ids(g),
                run_id=run_ids(g),
                name=bench_job.name,
                queue=QUEUE,
                tenant_id=None,
                idempotency_key=f"fill-{g}",
                payload=fill_payload(g),
                priority=0,
                run_at_ms=now if done else now + DAY_MS,
                max_attempts=3,
                dead_letter=True,
                enqueued_by=None,
                traceparent=None,
                created_at_ms=now,
                updated_at_ms=now,
                state="completed" if done else "ready",
                finished_at_ms=now if done else None,
            )
            jobs._rows[row.id] = row
            jobs._touch(row, now)


def fill_ids() -> Callable[[int], str]:
    """Ids for the rows of one memory or Redis fill, as cheap as Postgres's `gen_random_uuid()`:
    a random uuid's first 80 bits and the row's number, in the text form of a uuid."""
    head = str(uuid.uuid4())[:23]
    return lambda g: f"{head}-{g:012x}"


def fill_payload(g: int) -> str:
    """The input of the fill's row `g`, as `json.dumps` writes it."""
    return f'{{"i": {g}, "sent_at": 0}}'


def with_option(url: str, name: str, value: str) -> str:
    """`url` with the query option `name=value` added."""
    parts = urlsplit(url)
    query = urlencode([*parse_qsl(parts.query), (name, value)])
    return urlunsplit(parts._replace(query=query))


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

    @contextlib.asynccontextmanager
    async def through_pooler(self) -> AsyncIterator[None]:
        """W4pool: the app reopened on a pgbouncer in transaction mode in front of the same
        database (its URL declares the pooler), then on the direct URL again."""
        from xjobs_pg.pooler import pgbouncer_url

        direct = Target(self.engine, self.url)
        await XJobs.close(self)
        await XJobs.open(self, Target(self.engine, pgbouncer_url(direct.url)))
        try:
            yield
        finally:
            await XJobs.close(self)
            await XJobs.open(self, direct)

    def _alone_url(self) -> str:
        return with_option(self.url, "xjobs_schema", ALONE)

    async def _clear_alone(self) -> None:
        assert self.conn is not None
        await self.conn.execute(f'drop schema if exists "{ALONE}" cascade')

    async def _unfinished(self, queue: str) -> int:
        assert self.conn is not None
        count: int = await self.conn.fetchval(UNFINISHED_PG, queue)
        return count

    async def fill(self, n: int) -> None:
        assert self.conn is not None
        await self.conn.execute(FILL_PG, n)
        await self.conn.execute("analyze xjobs.jobs")

    async def fill_finished(self, n: int) -> None:
        assert self.conn is not None
        await self.conn.execute(FILL_FINISHED_PG, n)
        await self.conn.execute("analyze xjobs.jobs")

    async def purge_finished(self, keep_none: bool = False) -> int:
        """One pass of the default policy (or of `KEEP_NONE`), as the app's cron task runs it."""
        report = await self._app().purge(KEEP_NONE if keep_none else Retention())
        return report["jobs"]

    async def explain_claim(self) -> str:
        assert self.conn is not None
        claim = Statements('"xjobs"')["claim"]
        # the claim is a write: analyzed inside a transaction that is rolled back
        transaction = self.conn.transaction()
        await transaction.start()
        try:
            # as the driver's pool runs it: without JIT (else the time shown is the JIT's compile)
            await self.conn.execute("set local jit = off")
            args = (None, [QUEUE], [10], "bench-explain", 10, 30_000, None, "lapsed")
            rows = await self.conn.fetch(EXPLAIN + claim, *args)
        finally:
            await transaction.rollback()
        return "\n".join(row[0] for row in rows)

    async def explain_operator(self) -> dict[str, str]:
        """WOP: the statement of each operator read under `explain (analyze, buffers)`, bound as
        the driver binds it (a page asks for one row more, which tells whether another follows).
        Costs are shown: past `jit_above_cost` the server compiles the statement (JIT)."""
        assert self.conn is not None
        statements = Statements('"xjobs"')
        deep = decode_cursor(self.deep_cursor, EVERY_JOB)
        shapes: dict[str, tuple[JobFilter, JobPosition | None]] = {
            "first": (EVERY_JOB, None),
            "dead": (DEAD_IN_QUEUE, None),
            "deep": (EVERY_JOB, deep),
        }
        bound: dict[str, tuple[str, Bound]] = {
            name: (
                "list_jobs",
                ListParams(where, where.states or JOB_STATES, after, self.page + 1).bind(),
            )
            for name, (where, after) in shapes.items()
        }
        now_ms = self._app().clock.now_ms()
        bound["queues"] = ("queue_counts", QueueCountsParams(now_ms, COUNT_CAP).bind())
        plans: dict[str, str] = {}
        for name, (statement, args) in bound.items():
            rows = await self.conn.fetch(EXPLAIN_READ + statements[statement], *args)
            plans[name] = "\n".join(row[0] for row in rows)
        return plans


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

    def _alone_url(self) -> str:
        return with_option(self.url, "xjobs_prefix", ALONE)

    async def _clear_alone(self) -> None:
        assert self.redis is not None
        keys = [key async for key in self.redis.scan_iter(match=f"{ALONE}:*", count=1000)]
        if keys:
            await self.redis.delete(*keys)

    async def _unfinished(self, queue: str) -> int:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in (self.keys.ready(queue), self.keys.delayed(queue), self.keys.leased(queue)):
                pipe.zcard(key)
            counts = await pipe.execute()
        return sum(counts)

    async def fill(self, n: int) -> None:
        """W6's fill on Redis, each row as the enqueue and settle scripts leave it: its HASH; a
        completed one in its finished ZSET, a delayed one in delayed, in the live index by
        creation and holding its live namespace. Pipelined, FILL_CHUNK rows a round trip."""
        assert self.redis is not None
        k, name = self.keys, bench_job.name
        seconds, micros = await self.redis.time()
        now = seconds * 1000 + micros // 1000
        ids, run_ids, job_key = fill_ids(), fill_ids(), k.job(QUEUE, "")
        for start in range(1, n + 1, FILL_CHUNK):
            completed: dict[str, int] = {}
            delayed: dict[str, int] = {}
            live: dict[FieldT, EncodableT] = {}
            async with self.redis.pipeline(transaction=False) as pipe:
                for g in range(start, min(start + FILL_CHUNK, n + 1)):
                    done = g % 2 == 0
                    job_id = ids(g)
                    key = job_key + job_id
                    fields: dict[FieldT, EncodableT] = {
                        "id": job_id,
                        "run_id": run_ids(g),
                        "name": name,
                        "queue": QUEUE,
                        "idempotency_key": f"fill-{g}",
                        "payload": fill_payload(g),
                        "priority": 0,
                        "run_at_ms": now if done else now + DAY_MS,
                        "max_attempts": 3,
                        "dead_letter": "1",
                        "created_at_ms": now,
                        "updated_at_ms": now,
                        "state": "completed" if done else "ready",
                        "attempt": 0,
                        "claims": 0,
                    }
                    if done:
                        fields["finished_at_ms"] = now
                        completed[key] = now
                    else:
                        delayed[key] = now + DAY_MS
                        live[f"{name}\0\0fill-{g}"] = key
                    pipe.hset(key, mapping=fields)
                if completed:
                    pipe.zadd(k.finished(QUEUE, "completed"), completed)
                if delayed:
                    pipe.zadd(k.delayed(QUEUE), delayed)
                    pipe.zadd(k.created(QUEUE), dict.fromkeys(delayed, now))
                    pipe.hset(k.live(QUEUE), mapping=live)
                pipe.sadd(k.queues(), QUEUE)
                await pipe.execute()
