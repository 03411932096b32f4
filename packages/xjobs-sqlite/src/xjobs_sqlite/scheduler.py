"""The scheduler's state (watermarks, fires, pauses) and its leader lease, each call one write transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import NewJob
from xjobs.contract.stores import TaskFire
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.enqueue import enqueue_rows
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql

LEADER_NAME: Final = "scheduler"


def _move(conn: Connection, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
    """The watermark's compare-and-set from `previous_ms` (`None`: the task has no row yet)."""
    if previous_ms is None:
        params: dict[str, object] = {"task": task, "watermark_ms": watermark_ms}
        return conn.execute(sql("watermark_first"), params).rowcount == 1
    params = {"task": task, "watermark_ms": watermark_ms, "previous_ms": previous_ms}
    return conn.execute(sql("watermark_move"), params).rowcount == 1


def _fire(
    conn: Connection,
    task: str,
    previous_ms: int | None,
    occurrence_ms: int,
    job: NewJob,
    now: int,
) -> frozenset[str] | None:
    """Move the watermark, then enqueue and record the fire; the queues woken, `None` if it did not move."""
    if not _move(conn, task, previous_ms, occurrence_ms):
        return None
    done = enqueue_rows(conn, [job], now)
    params = {
        "task": task,
        "occurrence_ms": occurrence_ms,
        "job_id": done.results[0].job_id,
        "now": now,
    }
    conn.execute(sql("fire_record"), params)
    return done.due_queues


class SqliteSchedulerState:
    """`SchedulerState` over `task_watermarks`, `task_fires` and `task_pauses`."""

    def __init__(self, executor: Executor, wake: WakeSource) -> None:
        self._x = executor
        self._wake = wake

    async def watermarks(self, tasks: Sequence[str]) -> dict[str, int]:
        """The watermark of each named task that has one."""

        def read(conn: Connection) -> dict[str, int]:
            found = {}
            for task in tasks:
                row = conn.execute(sql("watermark_of"), {"task": task}).fetchone()
                if row is not None:
                    found[task] = int(row[0])
            return found

        return await self._x.read(read)

    async def arm(self, task: str, previous_ms: int | None, watermark_ms: int) -> bool:
        """Move the watermark without a job; whether it moved."""
        return await self._x.write(lambda conn: _move(conn, task, previous_ms, watermark_ms))

    async def fire(
        self, task: str, previous_ms: int | None, occurrence_ms: int, job: NewJob
    ) -> bool:
        """Move the watermark and, only if it moved, enqueue `job` and record the fire: one transaction."""
        now = self._x.now()
        woken = await self._x.write(
            lambda conn: _fire(conn, task, previous_ms, occurrence_ms, job, now)
        )
        for queue in sorted(woken or ()):
            self._wake.emit(queue)
        return woken is not None

    async def task_fires(self, tasks: Sequence[str] | None = None) -> dict[str, TaskFire]:
        """The last fire of each named task (`None`: every task) that dispatched."""
        rows = await self._x.read(lambda conn: conn.execute(sql("fire_rows")).fetchall())
        fires = {str(row[0]): TaskFire(*row) for row in rows}
        return fires if tasks is None else {t: fires[t] for t in tasks if t in fires}

    async def paused(self, tasks: Sequence[str]) -> set[str]:
        """Which of the named tasks are paused."""
        rows = await self._x.read(lambda conn: conn.execute(sql("task_pause_rows")).fetchall())
        paused = {str(row[0]) for row in rows}
        return {t for t in tasks if t in paused}

    async def pause(self, task: str) -> bool:
        """Pause a task; whether it was running."""
        params = {"task": task, "now": self._x.now()}
        added = await self._x.write(lambda conn: conn.execute(sql("task_pause"), params).rowcount)
        return added == 1

    async def resume(self, task: str) -> bool:
        """Resume a task; whether it was paused."""
        removed = await self._x.write(
            lambda conn: conn.execute(sql("task_resume"), {"task": task}).rowcount
        )
        return removed == 1


class SqliteLeader:
    """`LeaderElection` as a lease row on the injected clock: one statement an acquire or a renewal."""

    def __init__(self, executor: Executor, name: str = LEADER_NAME) -> None:
        self._x = executor
        self._name = name

    async def acquire(self, candidate: str, ttl_ms: int) -> bool:
        """Take or renew leadership for `ttl_ms`; whether `candidate` leads."""
        params = {
            "name": self._name,
            "candidate": candidate,
            "now": self._x.now(),
            "ttl_ms": ttl_ms,
        }
        took = await self._x.write(
            lambda conn: conn.execute(sql("leader_acquire"), params).rowcount
        )
        return took == 1

    async def release(self, candidate: str) -> None:
        """Give leadership up if `candidate` holds it."""
        params = {"name": self._name, "candidate": candidate}
        await self._x.write(lambda conn: conn.execute(sql("leader_release"), params))
