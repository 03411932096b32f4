"""The Postgres scheduler state and leaders: watermarks moved by compare-and-set, each fire one statement."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from xjobs.contract.driver import NewJob
from xjobs.contract.stores import TaskFire
from xjobs.errors import BackendError, BackendUnavailableError, LeaderUnsafeError
from xjobs_pg.errors import interpret_error
from xjobs_pg.executor import Executor
from xjobs_pg.params import One
from xjobs_pg.pooling import behind_proxy
from xjobs_pg.sql import Statements
from xjobs_pg.store_params import (
    ArmParams,
    FireParams,
    LeaderAcquireParams,
    LeaderReleaseParams,
    PauseParams,
    TasksParams,
)
from xjobs_pg.wake_slots import WakeSlots

LEASE_ELECTION = "scheduler"


class PostgresSchedulerState:
    """Watermarks in `<schema>.task_watermarks`, last fires in `task_fires`, pauses in `task_pauses`.

    A fire is the `task_fire` statement: the watermark's compare-and-set, and only if it moved the
    enqueue of the job (the driver's enqueue for one row, its wake decision included) and the
    record of the fire.
    """

    def __init__(self, executor: Executor, wake: WakeSlots) -> None:
        self._x = executor
        self._wake = wake

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        rows = await self._x.fetch("task_watermarks", TasksParams(tasks))
        return {row["task"]: row["watermark_ms"] for row in rows}

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        return bool(await self._x.fetch("task_arm", ArmParams(task, previous_ms, watermark_ms)))

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        now = self._x.now()
        due_by = now if now is not None else time.time_ns() // 1_000_000
        due = job.run_at_ms is None or job.run_at_ms <= due_by
        wake = self._wake.take([job.queue] if due else [])
        fire = FireParams(now, task, previous_ms, occurrence_ms, job, wake, self._wake.channel)
        # A live row of the job's namespace committed after the statement began leaves the fire no
        # job id to record: the statement rolls back whole, and runs once more (as enqueue does).
        for _ in range(2):
            try:
                row = await self._x.lanes.fetchrow(self._x.sql["task_fire"], *fire.bind())
            except asyncpg.NotNullViolationError as exc:
                if exc.table_name != "task_fires":
                    raise interpret_error(exc) from exc
                continue
            except Exception as exc:
                raise interpret_error(exc) from exc
            assert row is not None
            return bool(row["moved"])
        raise BackendError(f"task {task!r} could not record its fire of job {job.id} in two tries")

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        rows = await self._x.fetch("task_fires", TasksParams(tasks))
        return {
            row["task"]: TaskFire(
                task=row["task"],
                occurrence_ms=row["occurrence_ms"],
                job_id=str(row["job_id"]),
                fired_at_ms=row["fired_at_ms"],
            )
            for row in rows
        }

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        return {row["task"] for row in await self._x.fetch("task_paused", TasksParams(tasks))}

    async def pause(self, task: str) -> bool:
        return await self._x.fetchrow("task_pause", PauseParams(self._x.now(), task)) is not None

    async def resume(self, task: str) -> bool:
        return await self._x.execute("task_resume", One(task)) == 1


class PostgresLeaseLeader:
    """Leadership as a lease row in `<schema>.leaders`, one row per election name (the backend's default).

    Acquire is one upsert: a free, lapsed or own row is taken for `ttl_ms` on the backend's clock
    (the server's, unless the app injects a test clock); another holder's live row is left alone.
    """

    def __init__(self, executor: Executor, name: str = LEASE_ELECTION) -> None:
        self._x = executor
        self._name = name

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        """Take or renew the lease for `candidate` for `ttl_ms`; False while another holds it."""
        params = LeaderAcquireParams(self._x.now(), self._name, candidate, ttl_ms)
        return await self._x.fetchrow("leader_acquire", params) is not None

    async def release(self, candidate: str) -> None:
        """Give the lease up when `candidate` holds it (another holder's row is left alone)."""
        await self._x.execute("leader_release", LeaderReleaseParams(self._name, candidate))


class PostgresAdvisoryLeader:
    """Leadership as a session advisory lock (`pg_try_advisory_lock`) held on ONE dedicated connection.

    UNSAFE behind a transaction-pooling proxy (pgbouncer `pool_mode = transaction`): the lock lives
    in whichever server session ran the statement, and the proxy hands sessions to other clients
    between transactions. Connect straight to Postgres, or through session pooling. So each new
    connection is checked first: one that reaches the server through a proxy (`behind_proxy`) is
    closed and the acquire raises `LeaderUnsafeError`, unless `proxy_declared` (a session-pooling
    proxy the URL declares); it never leads.

    `ttl_ms` is not used: the lock lasts as long as the session. When the session ends the lock is
    free at once, with no grace, and an acquire that finds the connection dead answers `False`
    (leadership lost); the next acquire reconnects and tries again.
    """

    def __init__(
        self,
        dsn: str,
        key: str,
        statements: Statements,
        *,
        proxy_declared: bool = False,
        **connect: Any,
    ) -> None:
        self._dsn = dsn
        self._proxy_declared = proxy_declared
        self._key = key
        self._sql = statements
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._holder: str | None = None
        self._guard = asyncio.Lock()

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        """Hold the advisory lock for `candidate` (its own connection); False while another holds it."""
        async with self._guard:
            if self._holder not in (None, candidate):
                return False
            if self._conn is None:
                self._conn = await self._dial()
            try:
                leads = bool(
                    await self._conn.fetchval(self._sql["advisory_acquire"], *One(self._key).bind())
                )
            except Exception as exc:
                error = interpret_error(exc)
                if not isinstance(error, BackendUnavailableError):
                    raise error from exc
                self._drop()
                return False
            self._holder = candidate if leads else None
            return leads

    async def release(self, candidate: str) -> None:
        """Unlock and close when `candidate` holds the lock, or close a connection that holds nothing."""
        async with self._guard:
            conn = self._conn
            if conn is None or self._holder not in (None, candidate):
                return
            held = self._holder is not None
            self._conn, self._holder = None, None
            try:
                if held:
                    await conn.fetchval(self._sql["advisory_release"], *One(self._key).bind())
                await conn.close()
            except Exception as exc:
                error = interpret_error(exc)
                if not isinstance(error, BackendUnavailableError):
                    raise error from exc
            finally:
                # The session's end frees its locks whatever the unlock did.
                if not conn.is_closed():
                    conn.terminate()

    async def _dial(self) -> asyncpg.Connection:
        """A new dedicated connection, refused when it reaches the server through an undeclared proxy."""
        try:
            conn: asyncpg.Connection = await asyncpg.connect(self._dsn, **self._connect)
        except Exception as exc:
            raise interpret_error(exc) from exc
        try:
            proxied = not self._proxy_declared and await behind_proxy(conn, self._sql)
        except BaseException:
            conn.terminate()
            raise
        if proxied:
            conn.terminate()
            raise LeaderUnsafeError(
                "the advisory-lock leader's connection reaches Postgres through a pooling proxy: a "
                "session lock there may belong to another client (pgbouncer in transaction mode). "
                "Use the lease leader (the backend's default), connect this leader straight to "
                "Postgres, or declare a session-pooling proxy with xjobs_pooler=session"
            )
        return conn

    def _drop(self) -> None:
        """Forget a dead connection, and the leadership it held."""
        if self._conn is not None and not self._conn.is_closed():
            self._conn.terminate()
        self._conn, self._holder = None, None
