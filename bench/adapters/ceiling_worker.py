"""The raw ceilings' worker loop: claim up to `concurrency` jobs, run them at once, settle the batch."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from bench.probe import probe

Claimed = Sequence[tuple[object, str]]  # (job id, payload JSON)


async def _run(payload: str) -> None:
    body = json.loads(payload)
    probe.ran(body["i"], body["sent_at"])


@contextlib.asynccontextmanager
async def batch_worker(
    concurrency: int,
    claim: Callable[[int], Awaitable[Claimed]],
    settle: Callable[[list[object]], Awaitable[None]],
    idle: Callable[[], Awaitable[None]],
) -> AsyncIterator[None]:
    """Run the loop for the body of the `async with`; `idle` waits for a wake or a timeout."""

    async def loop() -> None:
        while True:
            jobs = await claim(concurrency)
            if not jobs:
                await idle()
                continue
            await asyncio.gather(*(_run(payload) for _, payload in jobs))
            await settle([job_id for job_id, _ in jobs])

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
