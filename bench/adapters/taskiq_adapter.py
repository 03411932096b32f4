"""taskiq 0.13 with taskiq-redis: `kiq` from this process onto a `ListQueueBroker` (a Redis list,
BRPOP), and taskiq's receiver in this process (`run_receiver_task`, what `taskiq worker` runs),
at most `concurrency` tasks at once."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from redis.asyncio import Redis
from taskiq.api import run_receiver_task  # type: ignore[import-not-found,unused-ignore]
from taskiq_redis import (  # type: ignore[import-not-found,unused-ignore]
    ListQueueBroker,
    RedisAsyncResultBackend,
)

from bench.contender import Contender, Engine, Target
from bench.probe import probe

QUEUE = "bench"
ANSWERS = "bench-answers"  # W10's tasks, on the broker that stores results


async def bench_job(i: int, sent_at: float) -> None:
    probe.ran(i, sent_at)


async def bench_answer(i: int, sent_at: float) -> int:
    probe.ran(i, sent_at)
    return i


class Taskiq(Contender):
    """taskiq has no bulk kick: `enqueue_bulk` stays `Unsupported`. A broker stores every task's
    result once it has a result backend, so results are off on the bench queue and on for W10's
    alone: a second broker, with `RedisAsyncResultBackend`, on a queue of its own (the worker
    listens on both); its waiter, `wait_result`, polls (taskiq's default 0.2 s)."""

    library = "taskiq"
    engine: ClassVar[Engine] = "redis"
    results = True
    _broker: Any
    _answers: Any
    _job: Any
    _answer: Any
    _redis: Redis

    def version(self) -> str:
        return importlib.metadata.version("taskiq")

    async def open(self, target: Target) -> None:
        logging.getLogger("taskiq").setLevel(logging.WARNING)
        self._broker = ListQueueBroker(target.url, queue_name=QUEUE)
        backend = RedisAsyncResultBackend(target.url)
        self._answers = ListQueueBroker(target.url, queue_name=ANSWERS).with_result_backend(backend)
        self._job = self._broker.register_task(bench_job, task_name="bench_job")
        self._answer = self._answers.register_task(bench_answer, task_name="bench_answer")
        for broker in (self._broker, self._answers):
            await broker.startup()
        self._redis = Redis.from_url(target.url)

    async def close(self) -> None:
        for broker in (self._broker, self._answers):
            await broker.shutdown()
        await self._redis.aclose()

    async def reset(self) -> None:
        await self._redis.flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._job.kiq(i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        sent = await self._answer.kiq(i, sent_at)
        result = await sent.wait_result(timeout=timeout_s)
        return result.return_value

    async def unfinished(self) -> int:
        # a task leaves the list when the receiver pops it; the probe saw every run start
        return int(await self._redis.llen(QUEUE))

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        receivers = [
            asyncio.create_task(run_receiver_task(broker, max_async_tasks=concurrency))
            for broker in (self._broker, self._answers)
        ]
        try:
            yield
        finally:
            for receiver in receivers:
                receiver.cancel()
            await asyncio.gather(*receivers, return_exceptions=True)
