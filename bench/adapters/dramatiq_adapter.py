"""Dramatiq 2 on Redis: `actor.send` from this process, dramatiq's `Worker` (a consumer thread and
a worker thread per slot, what `dramatiq -t N` runs in each process) in this process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import dramatiq  # type: ignore[import-not-found,unused-ignore]
from dramatiq.brokers.redis import RedisBroker  # type: ignore[import-not-found,unused-ignore]
from dramatiq.results import Results  # type: ignore[import-not-found,unused-ignore]
from dramatiq.results.backends.redis import (  # type: ignore[import-not-found,unused-ignore]
    RedisBackend,
)
from redis.asyncio import Redis

from bench import remote
from bench.contender import Contender, Engine, Target

QUEUE = "bench"
NAMESPACE = "dramatiq"  # RedisBroker's default key prefix
STOP_TIMEOUT_MS = 10_000


def bench_job(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)


def bench_answer(i: int, sent_at: float) -> int:
    remote.ran(i, sent_at)
    return i


class Dramatiq(Contender):
    """Dramatiq has no bulk enqueue (a group sends one message a job): `enqueue_bulk` stays
    `Unsupported`. Results only where W10 reads them: its Results middleware, and
    `store_results` on that actor alone; the waiter blocks on the result key."""

    library = "dramatiq"
    engine: ClassVar[Engine] = "redis"
    results = True
    _broker: Any
    _backend: Any
    _job: Any
    _answer: Any
    _redis: Redis

    def version(self) -> str:
        return importlib.metadata.version("dramatiq")

    async def open(self, target: Target) -> None:
        logging.getLogger("dramatiq").setLevel(logging.WARNING)
        self._broker = RedisBroker(url=target.url, namespace=NAMESPACE)
        self._backend = RedisBackend(url=target.url)
        self._broker.add_middleware(Results(backend=self._backend))
        dramatiq.set_broker(self._broker)
        self._job = dramatiq.actor(bench_job, broker=self._broker, queue_name=QUEUE)
        self._answer = dramatiq.actor(
            bench_answer, broker=self._broker, queue_name=QUEUE, store_results=True
        )
        self._redis = Redis.from_url(target.url)

    async def close(self) -> None:
        self._broker.close()
        await self._redis.aclose()

    async def reset(self) -> None:
        await self._redis.flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        self._job.send(i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        message = self._answer.send(i, sent_at)
        wait = message.get_result
        return await asyncio.to_thread(wait, block=True, timeout=int(timeout_s * 1000))

    async def unfinished(self) -> int:
        # a message stays in the queue's hash until it is acked, after its run
        return int(await self._redis.hlen(f"{NAMESPACE}:{QUEUE}.msgs"))

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        worker = dramatiq.Worker(self._broker, worker_threads=concurrency)
        async with remote.listening():
            worker.start()
            try:
                yield
            finally:
                await asyncio.to_thread(worker.stop, STOP_TIMEOUT_MS)
                # a worker leaves its hooks on the broker: the next worker in this process adds its own
                hooks = self._broker.middleware
                hooks[:] = [m for m in hooks if type(m).__name__ != "_WorkerMiddleware"]
