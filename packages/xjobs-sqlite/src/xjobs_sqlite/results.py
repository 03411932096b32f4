"""The result store: a body's result stored by its fenced completion, and a waiter's wake-up.

A settle of this process wakes its waiters at once; a settle of another process is seen by the
waiter's next read, after at most `RESULT_POLL_MS` (the contract's "short poll").
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from xjobs.contract.driver import Claim
from xjobs.contract.results import StoredResult
from xjobs_sqlite.driver import SqliteJobDriver
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql

RESULT_POLL_MS: Final = 50


class SettleWaiters:
    """Result waiters of this process by job id, woken when this process finishes the job."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def settled(self, job_id: str) -> None:
        """Wake the waiters of `job_id` (a settle of this process finished it)."""
        if not self._waiters:  # the usual case: nobody waits for any result
            return
        for waiter in self._waiters.pop(job_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, job_id: str, timeout_s: float) -> None:
        """Return when `job_id` settles here, or after `timeout_s`."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[job_id]


class SqliteResults:
    """`ResultStore` over `jobs.result`: `complete` is the driver's ack with the result in its update."""

    def __init__(self, executor: Executor, jobs: SqliteJobDriver, waiters: SettleWaiters) -> None:
        self._x = executor
        self._jobs = jobs
        self._waiters = waiters

    async def complete(self, claim: Claim, result: str) -> bool:
        """Settle `completed` storing `result`, fenced like `ack`."""
        return await self._jobs.complete(claim, result)

    async def read(self, job_id: str) -> StoredResult | None:
        """The job's state, result and last error, or `None`."""
        row = await self._x.read(
            lambda conn: conn.execute(sql("result_read"), {"id": job_id}).fetchone()
        )
        return None if row is None else StoredResult(row[0], row[1], row[2])

    async def wait(self, job_id: str, timeout_ms: int) -> None:
        """Until this process settles the job, or a short poll (another process's settle)."""
        await self._waiters.wait(job_id, min(timeout_ms, RESULT_POLL_MS) / 1000)
