"""DBOS Transact 3 on Postgres and on a SQLite file: workflows enqueued on a DBOS queue by a
`DBOSClient` (what an application that does not run them uses), run by DBOS launched in this
process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import sqlalchemy  # type: ignore[import-not-found,unused-ignore]
from dbos import DBOS, DBOSClient  # type: ignore[import-not-found,unused-ignore]

from bench import remote
from bench.contender import Contender, Engine, Target

QUEUE = "bench"
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


job = DBOS.workflow(name="bench_job")(_job)
answer = DBOS.workflow(name="bench_answer")(_answer)


class Dbos(Contender):
    """DBOS has no bulk enqueue: `enqueue_bulk` stays `Unsupported`. Every workflow's status row
    is its result store, so W10 reads the answer through the client's handle
    (`get_result`, which polls the row)."""

    library = "dbos"
    results = True
    _client: Any
    _url: str

    def version(self) -> str:
        return importlib.metadata.version("dbos")

    async def open(self, target: Target) -> None:
        logging.getLogger("dbos").setLevel(logging.WARNING)
        self._url = target.url
        # DBOS creates its schema on launch: once here, so the client finds it
        async with self._launched(10):
            pass
        self._client = DBOSClient(system_database_url=target.url)

    async def close(self) -> None:
        self._client.destroy()

    async def reset(self) -> None:
        engine = sqlalchemy.create_engine(self._url)
        try:
            with engine.begin() as conn:
                conn.execute(sqlalchemy.text(RESET))
        finally:
            engine.dispose()

    async def enqueue(self, i: int, sent_at: float) -> None:
        self._client.enqueue({"workflow_name": "bench_job", "queue_name": QUEUE}, i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        options = {"workflow_name": "bench_answer", "queue_name": QUEUE}
        handle = self._client.enqueue(options, i, sent_at)
        return await asyncio.wait_for(asyncio.to_thread(handle.get_result), timeout_s)

    async def unfinished(self) -> int:
        engine = sqlalchemy.create_engine(self._url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(sqlalchemy.text(UNFINISHED)).scalar_one())
        finally:
            engine.dispose()

    @contextlib.asynccontextmanager
    async def _launched(self, concurrency: int, poll_s: float = POLL_S) -> AsyncIterator[None]:
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


RESET = "delete from dbos.workflow_status"
UNFINISHED = "select count(*) from dbos.workflow_status where status in ('ENQUEUED', 'PENDING')"


class DbosPostgres(Dbos):
    library = "dbos-pg"
    engine: ClassVar[Engine] = "postgres"


class DbosSqlite(Dbos):
    """DBOS 3.4's SQLite schema stamps rows with `unixepoch('subsec')` on Python 3.12+, which needs
    SQLite 3.42: on an older library (this machine's Python links 3.40.1) its launch fails."""

    library = "dbos-sqlite"
    engine: ClassVar[Engine] = "sqlite"
