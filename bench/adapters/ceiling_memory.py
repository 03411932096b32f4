"""The memory ceiling: an `asyncio.Queue` and `concurrency` consumer tasks, no library at all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import ClassVar

from bench.contender import Contender, Engine, Target
from bench.probe import probe


class CeilingMemory(Contender):
    library = "ceiling"
    engine: ClassVar[Engine] = "memory"

    def __init__(self) -> None:
        self.jobs: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
        self.pending = 0

    def version(self) -> str:
        return "asyncio.Queue"

    async def open(self, target: Target) -> None:
        self.jobs = asyncio.Queue()

    async def close(self) -> None:
        return None

    async def reset(self) -> None:
        self.jobs = asyncio.Queue()
        self.pending = 0

    async def enqueue(self, i: int, sent_at: float) -> None:
        self.jobs.put_nowait((i, sent_at))
        self.pending += 1

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        for item in items:
            self.jobs.put_nowait(item)
        self.pending += len(items)

    async def _consume(self) -> None:
        while True:
            i, sent_at = await self.jobs.get()
            probe.ran(i, sent_at)
            self.pending -= 1

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        consumers = [asyncio.create_task(self._consume()) for _ in range(concurrency)]
        try:
            yield
        finally:
            for task in consumers:
                task.cancel()
            await asyncio.gather(*consumers, return_exceptions=True)

    async def unfinished(self) -> int:
        return self.pending
