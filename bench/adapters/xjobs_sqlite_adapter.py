"""xjobs on a SQLite file (`xjobs-sqlite`), on the standard library's sqlite3 and on apsw: the
worker's App, and a second App on the same file that enqueues one by one, as a web process would."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

import xjobs
from bench.adapters.xjobs_adapter import QUEUE, Numbered, XJobs, bench_job
from bench.contender import Engine, Target
from xjobs_sqlite.apsw_connection import sqlite_version

# what a repetition's workloads leave behind; the schema stays
RESET = """
begin immediate;
delete from jobs; delete from steps; delete from attempt_errors; delete from counters;
delete from counter_folds; delete from slots; delete from workers;
commit;
"""
UNFINISHED = (
    "select (select count(*) from jobs where queue = ? and state in ('ready', 'waiting')"
    " and run_at_ms <= ?) + (select count(*) from jobs where queue = ? and state = 'running')"
)

# the enqueuing App's own handle, under the bench job's name: opening that App binds this one
# and leaves `bench_job` bound to the worker's App
far_job = xjobs.job(
    bench_job.fn, tenant="none", idempotency_key=lambda p: str(p.i), queue=QUEUE, name="bench_job"
)


class XJobsSqlite(XJobs):
    """W1 and W4 enqueue through the second App: its commit reaches the worker's process the way
    another process's does (`PRAGMA data_version`, polled every 10 ms), not by the in-process wake."""

    engine: ClassVar[Engine] = "sqlite"
    driver = "sqlite3"

    def __init__(self) -> None:
        super().__init__()
        self.far: xjobs.App | None = None
        self.conn: sqlite3.Connection | None = None
        self.path = ""

    def version(self) -> str:
        linked = sqlite3.sqlite_version
        if self.driver == "apsw":
            linked = ".".join(map(str, sqlite_version()))
        return f"{super().version()} ({self.driver}, SQLite {linked})"

    async def open(self, target: Target) -> None:
        # appended, not through urlunsplit, which folds `sqlite:////abs` into a host
        url = target.url if self.driver == "sqlite3" else target.url + "?driver=apsw"
        self.path = urlsplit(target.url).path
        await super().open(Target(target.engine, url))
        self.far = xjobs.App(backend=url, jobs=[far_job], retention=None)
        await self.far.open()
        self.conn = sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=False
        )

    async def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        if self.far is not None:
            await self.far.close()
        await super().close()

    def _run(self, statement: str, *params: object) -> int:
        assert self.conn is not None
        row = self.conn.execute(statement, params).fetchone()
        return int(row[0]) if row else 0

    async def reset(self) -> None:
        assert self.conn is not None
        await asyncio.to_thread(self.conn.executescript, RESET)

    async def enqueue(self, i: int, sent_at: float) -> None:
        await far_job.enqueue(Numbered(i=i, sent_at=sent_at))

    async def _unfinished(self, queue: str) -> int:
        now = self._app().clock.now_ms()
        return await asyncio.to_thread(self._run, UNFINISHED, queue, now, queue)

    def _alone_url(self) -> str:
        return f"sqlite:///{Path(self.path).with_name('alone.db')}"


class XJobsSqliteApsw(XJobsSqlite):
    """The same on apsw (`?driver=apsw`, `xjobs-sqlite[apsw]`): the SQLite it bundles."""

    driver = "apsw"
