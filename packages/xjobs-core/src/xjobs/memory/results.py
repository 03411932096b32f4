"""The memory result store: results kept on the rows, a waiter woken by an in-process event."""

from __future__ import annotations

import asyncio

from xjobs.contract.driver import Claim
from xjobs.contract.results import StoredResult
from xjobs.memory.driver import MemoryJobDriver


class MemoryResults:
    """`ResultStore` over the memory driver: `complete` is its ack with the result in the row."""

    def __init__(self, jobs: MemoryJobDriver) -> None:
        self._jobs = jobs
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        jobs.on_settle(self._settled)

    def _settled(self, job_id: str) -> None:
        if not self._waiters:  # the usual case: nobody waits for any result
            return
        for waiter in self._waiters.pop(job_id, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def complete(self, claim: Claim, result: str) -> bool:
        return self._jobs.complete(claim, result)

    async def read(self, job_id: str) -> StoredResult | None:
        row = self._jobs.row(job_id)
        if row is None:
            return None
        return StoredResult(row.state, row.result, row.last_error)

    async def wait(self, job_id: str, timeout_ms: int) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_ms / 1000)
        except TimeoutError:
            pass
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[job_id]
