"""arq 0.28 on Redis: `ArqRedis.enqueue_job` and arq's polling `Worker`, run in this process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator
from typing import Any

from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.constants import default_queue_name
from arq.worker import Worker

from bench.contender import Contender, Target
from bench.probe import probe

STOP_TIMEOUT_S = 5.0


async def bench_job(ctx: dict[str, Any], i: int, sent_at: float) -> None:
    probe.ran(i, sent_at)


async def bench_answer(ctx: dict[str, Any], i: int, sent_at: float) -> int:
    """W10: a job whose body returns a small value (its number) for the enqueuer to await."""
    probe.ran(i, sent_at)
    return i


class Arq(Contender):
    """arq has no bulk enqueue, so `enqueue_bulk` stays `Unsupported`.

    W10 awaits `Job.result()` with arq's default poll delay (0.5 s): arq has no settle hint, its
    waiter reads the result key on that period."""

    library = "arq"
    results = True
    engine = "redis"
    _settings: RedisSettings
    _redis: ArqRedis

    def version(self) -> str:
        return importlib.metadata.version("arq")

    async def open(self, target: Target) -> None:
        logging.getLogger("arq").setLevel(logging.WARNING)
        self._settings = RedisSettings.from_dsn(target.url)
        self._redis = await create_pool(self._settings)

    async def close(self) -> None:
        await self._redis.aclose(close_connection_pool=True)

    async def reset(self) -> None:
        await self._redis.flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._redis.enqueue_job("bench_job", i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        job = await self._redis.enqueue_job("bench_answer", i, sent_at)
        assert job is not None  # None only when a job of the same id is already queued
        return await job.result(timeout=timeout_s)

    async def unfinished(self) -> int:
        # A job leaves the queue zset only when it finishes (in the MULTI that also deletes its
        # in-progress key), so running jobs are already counted here.
        return int(await self._redis.zcard(default_queue_name))

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        worker = Worker(
            [bench_job, bench_answer],
            # its own pool, as a separate worker process would have: Worker.close() closes it
            redis_pool=await create_pool(self._settings),
            max_jobs=concurrency,
            handle_signals=False,
        )
        # what Worker.async_run() does, without awaiting it
        worker.main_task = asyncio.create_task(worker.main())
        try:
            yield
        finally:
            # Worker.close() cancels running jobs, then gathers them and so re-raises a cancelled
            # job's CancelledError: stop polling first and give running jobs a few seconds.
            worker.main_task.cancel()
            await asyncio.wait([worker.main_task, *worker.tasks.values()], timeout=STOP_TIMEOUT_S)
            await worker.close()
