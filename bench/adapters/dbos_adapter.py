"""DBOS Transact 3 on Postgres and on a SQLite file: workflows enqueued on a DBOS queue by a
`DBOSClient` (what an application that does not run them uses), run by DBOS launched in this
process; W8 as a workflow of three steps, W11 as a workflow enqueueing its children on a second
queue and gathering them."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import sqlalchemy  # type: ignore[import-not-found,unused-ignore]
from dbos import DBOS, DBOSClient  # type: ignore[import-not-found,unused-ignore]

from bench import remote
from bench.contender import Contender, Engine, Target, Unsupported
from bench.probe import probe
from bench.workloads import drain

QUEUE = "bench"
CHILDREN = "bench-children"  # W11: the parent's children, on a queue of their own
# how often DBOS's queue thread looks for work while a workload runs: its default, 1 s, would cap
# a drain at `concurrency` runs a second; W5 (idle) runs at the default
POLL_S = 0.01
DEFAULT_POLL_S = 1.0
STOP_S = 5


def _job(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)


def _answer(i: int, sent_at: float) -> int:
    remote.ran(i, sent_at)
    return i


def _step() -> None:
    """W8: a step that does nothing; DBOS records its output."""


step = DBOS.step(name="bench_step")(_step)


def _three_steps(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)
    for _ in range(3):
        step()


def _child() -> None:
    """W11: a no-op child."""


def _parent(children: int, sent_at: float) -> None:
    queue = DBOS.retrieve_queue(CHILDREN)
    handles = [queue.enqueue(child) for _ in range(children)]
    for handle in handles:
        handle.get_result()
    remote.ran(children, sent_at)


job = DBOS.workflow(name="bench_job")(_job)
answer = DBOS.workflow(name="bench_answer")(_answer)
three_steps = DBOS.workflow(name="bench_three_steps")(_three_steps)
child = DBOS.workflow(name="bench_child")(_child)
parent = DBOS.workflow(name="bench_parent")(_parent)


class Dbos(Contender):
    """DBOS has no bulk enqueue: `enqueue_bulk` stays `Unsupported`. Every workflow's status row
    is its result store, so W10 reads the answer through the client's handle
    (`get_result`, which polls the row)."""

    library = "dbos"
    results = True
    schema: ClassVar[str] = ""
    _client: Any
    _url: str

    def version(self) -> str:
        return importlib.metadata.version("dbos")

    def refusal(self) -> str | None:
        """Why DBOS cannot run on this engine here, if it cannot."""
        return None

    def _usable(self) -> None:
        refusal = self.refusal()
        if refusal is not None:
            raise Unsupported(refusal)

    async def open(self, target: Target) -> None:
        logging.getLogger("dbos").setLevel(logging.WARNING)
        self._url = target.url
        self._client = None
        if self.refusal() is not None:
            return  # every workload answers why (`_usable`)
        # DBOS creates its schema on launch: once here, so the client finds it
        async with self._launched(10):
            pass
        self._client = DBOSClient(system_database_url=target.url)

    async def close(self) -> None:
        if self._client is not None:
            self._client.destroy()

    async def reset(self) -> None:
        self._usable()
        engine = sqlalchemy.create_engine(self._url)
        try:
            with engine.begin() as conn:
                conn.execute(sqlalchemy.text(RESET.format(schema=self.schema)))
        finally:
            engine.dispose()

    async def enqueue(self, i: int, sent_at: float) -> None:
        self._client.enqueue({"workflow_name": "bench_job", "queue_name": QUEUE}, i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        options = {"workflow_name": "bench_answer", "queue_name": QUEUE}
        handle = self._client.enqueue(options, i, sent_at)
        return await asyncio.wait_for(asyncio.to_thread(handle.get_result), timeout_s)

    async def steps(self, runs: int) -> dict[str, float]:
        """W8: `runs` three-step workflows through one worker (c=10); DBOS's step writes per run
        (its `operation_outputs` rows; the reads it makes are not counted here)."""
        self._usable()
        options = {"workflow_name": "bench_three_steps", "queue_name": QUEUE}
        before = await asyncio.to_thread(self._scalar, STEP_WRITES.format(schema=self.schema))
        for i in range(runs):
            self._client.enqueue(options, i, 0.0)
        _, window = await drain(self, runs, 10)
        writes = await asyncio.to_thread(self._scalar, STEP_WRITES.format(schema=self.schema))
        return {"runs_per_s": runs / window.seconds, "step_writes_per_run": (writes - before) / runs,
                **window.per_1k(runs)}  # fmt: skip

    async def fan_out(self, children: int, timeout_s: float) -> None:
        probe.reset(1)
        options = {"workflow_name": "bench_parent", "queue_name": QUEUE}
        self._client.enqueue(options, children, time.time())
        await asyncio.wait_for(probe.done.wait(), timeout_s)

    def _scalar(self, statement: str) -> int:
        engine = sqlalchemy.create_engine(self._url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(sqlalchemy.text(statement)).scalar_one())
        finally:
            engine.dispose()

    async def unfinished(self) -> int:
        return await asyncio.to_thread(self._scalar, UNFINISHED.format(schema=self.schema))

    @contextlib.asynccontextmanager
    async def _launched(self, concurrency: int, poll_s: float = POLL_S) -> AsyncIterator[None]:
        self._usable()
        config = {
            "name": "bench",
            "system_database_url": self._url,
            "run_admin_server": False,
            "log_level": "WARNING",
        }
        DBOS(config=config)  # type: ignore[arg-type,unused-ignore]
        await asyncio.to_thread(DBOS.launch)
        await asyncio.to_thread(
            DBOS.register_queue, QUEUE, worker_concurrency=concurrency, polling_interval_sec=poll_s,
            on_conflict="always_update",
        )  # fmt: skip
        await asyncio.to_thread(
            DBOS.register_queue, CHILDREN, worker_concurrency=concurrency,
            polling_interval_sec=poll_s, on_conflict="always_update",
        )  # fmt: skip
        try:
            yield
        finally:
            await asyncio.to_thread(DBOS.destroy, workflow_completion_timeout_sec=STOP_S)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        async with remote.listening(), self._launched(concurrency):
            yield

    def idle(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._launched(10, DEFAULT_POLL_S)


# DBOS's tables: in the `dbos` schema on Postgres, the file's own on SQLite
RESET = "delete from {schema}workflow_status"
STEP_WRITES = "select count(*) from {schema}operation_outputs"
UNFINISHED = "select count(*) from {schema}workflow_status where status in ('ENQUEUED', 'PENDING')"


class DbosPostgres(Dbos):
    library = "dbos-pg"
    engine: ClassVar[Engine] = "postgres"
    schema: ClassVar[str] = "dbos."


class DbosSqlite(Dbos):
    """DBOS 3.4's SQLite schema stamps rows with `unixepoch('subsec')` on Python 3.12+, which needs
    SQLite 3.42: on an older library (this machine's Python links 3.40.1) its launch fails."""

    library = "dbos-sqlite"
    engine: ClassVar[Engine] = "sqlite"

    def refusal(self) -> str | None:
        if sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42):
            return (
                f"DBOS's SQLite schema needs SQLite 3.42 on Python 3.12+ (unixepoch('subsec')); "
                f"this Python links {sqlite3.sqlite_version}"
            )
        return None
