"""The small interface every benchmarked library implements, and the registry of adapters."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

Engine = Literal["memory", "postgres", "redis", "sqlite"]
# WOP: one operator read, timed as a call; it answers the ids it read (a line a queue for the counts)
Read = Callable[[], Awaitable[tuple[str, ...]]]


class Unsupported(Exception):
    """The library has no such operation; the report shows `none` for the workload (`not yet`
    where its reason starts with NOT_YET: an operation the library will have)."""


NOT_YET = "not yet"


@dataclass(frozen=True)
class Target:
    """Where a contender keeps its jobs: a database of its own (Postgres), a logical db (Redis) or
    a file in a directory of its own (SQLite, `sqlite:///path`)."""

    engine: Engine
    url: str


class Contender:
    """One library on one engine. A job body must call `bench.probe.probe.ran(i, sent_at)` first.

    Every method is driven by `bench.workloads`; an operation the library lacks raises `Unsupported`.
    """

    library: ClassVar[str]
    engine: ClassVar[Engine]
    queue: ClassVar[str] = "bench"
    results: ClassVar[bool] = False  # W10: the library hands a job's return value to its enqueuer

    def version(self) -> str:
        """The version of the library under test (`importlib.metadata.version`)."""
        raise NotImplementedError

    async def open(self, target: Target) -> None:
        """Connect and install the library's schema into `target` (an empty database / db)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release every connection."""
        raise NotImplementedError

    async def reset(self) -> None:
        """Remove every job, so the next workload starts on empty storage."""
        raise NotImplementedError

    async def enqueue(self, i: int, sent_at: float) -> None:
        """Enqueue one job carrying `i` and `sent_at`, in one library call."""
        raise NotImplementedError

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        """Enqueue every item in one bulk call of the library."""
        raise Unsupported("no bulk enqueue")

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        """W10: enqueue one job carrying `i` and `sent_at` whose body returns `i`, and await what
        it returned (at most `timeout_s`), through the library's own result API. Only called
        when `results` is true."""
        raise Unsupported("no job results")

    def worker(self, concurrency: int) -> contextlib.AbstractAsyncContextManager[None]:
        """A worker running in this process for the body of the `async with`, `concurrency` jobs at once."""
        raise NotImplementedError

    def standby(self, concurrency: int) -> contextlib.AbstractAsyncContextManager[None]:
        """Around a drain's window: a worker process of the peer's own, started and idle, that
        `worker` then sets to work (by default nothing: the worker runs in this process)."""
        return contextlib.nullcontext()

    async def fan_out(self, children: int, timeout_s: float) -> None:
        """W11: start one parent that maps `children` no-op children and whose continuation runs
        once every child has; return when the continuation has run (at most `timeout_s`)."""
        raise Unsupported("no fan-out")

    def idle(self) -> contextlib.AbstractAsyncContextManager[None]:
        """W5: what a deployment leaves running with nothing to do (by default one worker)."""
        return self.worker(10)

    async def unfinished(self) -> int:
        """How many due jobs are not yet settled as completed (W6's rows a day ahead don't count)."""
        raise NotImplementedError

    async def fill(self, n: int) -> None:
        """W6: add `n` rows that are not runnable — half completed, half delayed by a day — in one
        bulk statement (never n calls)."""
        raise Unsupported("no table to fill")

    async def fill_finished(self, n: int) -> None:
        """W9: add `n` rows finished long before any retention keeps them (two weeks and a day
        ago), in one bulk statement."""
        raise Unsupported("no retention purge")

    async def purge_finished(self, keep_none: bool = False) -> int:
        """W9 and W6: one retention pass, answering the rows it removed (`keep_none`: a policy
        that keeps no finished job, so W6's completed fill goes as it would in production)."""
        raise Unsupported("no retention purge")

    async def explain_claim(self) -> str:
        """W6: the `explain` plan of the library's claim statement, on the filled table."""
        raise Unsupported("no claim statement")

    async def seed_operator(self, live: int, dead: int) -> None:
        """WOP: the operator's own rows, in two stores: the contender's (which `fill` then fills)
        and a second one beside it that holds them alone. In each, in the bench queue: `live` jobs
        delayed by a day, then `dead` jobs that failed their one attempt (each with its error)."""
        raise Unsupported("no operator surface")

    async def operator_reads(self, page: int, deep: int) -> dict[str, tuple[Read, Read]]:
        """WOP: each operator read by name (`first`, `dead`, `deep`, `queues`), as a pair: on the
        store of the own rows alone, and on the contender's store. The reads: the first page of
        `page` jobs, a page of the queue's dead jobs, the page after the cursor that ends a page
        of `deep` jobs (taken here, before the fill), and the queue counts."""
        raise Unsupported("no operator surface")

    async def explain_operator(self) -> dict[str, str]:
        """WOP: the `explain` plan of the statement of each read, by name, on the filled table."""
        raise Unsupported("no operator statement")


ADAPTERS: dict[str, tuple[Engine, str]] = {
    # contender name -> its engine, and the `module:Class` of its Contender subclass
    "xjobs-memory": ("memory", "bench.adapters.xjobs_adapter:XJobsMemory"),
    "xjobs-pg": ("postgres", "bench.adapters.xjobs_adapter:XJobsPostgres"),
    "xjobs-redis": ("redis", "bench.adapters.xjobs_adapter:XJobsRedis"),
    "xjobs-sqlite": ("sqlite", "bench.adapters.xjobs_sqlite_adapter:XJobsSqlite"),
    "xjobs-sqlite-apsw": ("sqlite", "bench.adapters.xjobs_sqlite_adapter:XJobsSqliteApsw"),
    "ceiling-memory": ("memory", "bench.adapters.ceiling_memory:CeilingMemory"),
    "ceiling-pg": ("postgres", "bench.adapters.ceiling_pg:CeilingPostgres"),
    "ceiling-redis": ("redis", "bench.adapters.ceiling_redis:CeilingRedis"),
    "ceiling-sqlite": ("sqlite", "bench.adapters.ceiling_sqlite:CeilingSqlite"),
    "procrastinate": ("postgres", "bench.adapters.procrastinate_adapter:Procrastinate"),
    "pgqueuer": ("postgres", "bench.adapters.pgqueuer_adapter:PGQueuer"),
    "saq-pg": ("postgres", "bench.adapters.saq_adapter:SaqPostgres"),
    "oban": ("postgres", "bench.adapters.oban_adapter:Oban"),
    "arq": ("redis", "bench.adapters.arq_adapter:Arq"),
    "saq-redis": ("redis", "bench.adapters.saq_adapter:SaqRedis"),
    "celery": ("redis", "bench.adapters.celery_adapter:Celery"),
    "dramatiq": ("redis", "bench.adapters.dramatiq_adapter:Dramatiq"),
    "rq": ("redis", "bench.adapters.rq_adapter:RQ"),
    "huey-redis": ("redis", "bench.adapters.huey_adapter:HueyRedis"),
    "huey-sqlite": ("sqlite", "bench.adapters.huey_adapter:HueySqlite"),
    "taskiq": ("redis", "bench.adapters.taskiq_adapter:Taskiq"),
    "dbos-pg": ("postgres", "bench.adapters.dbos_adapter:DbosPostgres"),
    "dbos-sqlite": ("sqlite", "bench.adapters.dbos_adapter:DbosSqlite"),
}
# the peers that need redis-py 6 or newer (Celery's kombu, taskiq-redis), where arq and saq cap it
# below 6 and 8: they run in a venv of their own (`python -m bench --peers-python`), with the rest
# of this list beside them
OWN_VENV = frozenset(
    ("celery", "dramatiq", "rq", "huey-redis", "huey-sqlite", "taskiq", "dbos-pg", "dbos-sqlite")
)


def engine_of(name: str) -> Engine:
    """The engine a registered contender runs on, known without importing its library."""
    return ADAPTERS[name][0]


def load(name: str) -> Contender:
    """A fresh contender by its registered name."""
    module, _, attr = ADAPTERS[name][1].partition(":")
    cls: type[Contender] = getattr(importlib.import_module(module), attr)
    return cls()


@contextlib.asynccontextmanager
async def opened(contender: Contender, target: Target) -> AsyncIterator[Contender]:
    """`contender` opened on `target` for the body, closed after."""
    await contender.open(target)
    try:
        yield contender
    finally:
        await contender.close()
