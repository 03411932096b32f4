"""huey 3 on Redis (`RedisHuey`, its blocking pop) and on a SQLite file (`SqliteHuey`): a task
call enqueues, the consumer runs in this process with a worker thread per slot, as huey's
`-k thread -w N` does."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import signal
from collections.abc import AsyncIterator
from typing import Any, ClassVar
from urllib.parse import urlsplit

from huey import RedisHuey, SqliteHuey  # type: ignore[import-not-found,unused-ignore]
from redis import ConnectionPool

from bench import remote
from bench.contender import Contender, Engine, Target

MAX_CONNECTIONS = 1000


def bench_job(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)


def bench_answer(i: int, sent_at: float) -> int:
    remote.ran(i, sent_at)
    return i


class Huey(Contender):
    """huey has no bulk enqueue (`Task.map` is one enqueue an item): `enqueue_bulk` stays
    `Unsupported`. Results are on (huey's default): a task returning None stores nothing, so
    only W10's answers are written; its waiter is `Result.get(blocking=True)` (on Redis woken by
    huey's result notification, on SQLite polling)."""

    library = "huey"
    results = True
    _huey: Any
    _job: Any
    _answer: Any

    def version(self) -> str:
        return importlib.metadata.version("huey")

    def connect(self, target: Target) -> Any:
        raise NotImplementedError

    async def open(self, target: Target) -> None:
        logging.getLogger("huey").setLevel(logging.WARNING)
        self._huey = self.connect(target)
        self._job = self._huey.task(name="bench_job")(bench_job)
        self._answer = self._huey.task(name="bench_answer")(bench_answer)

    async def close(self) -> None:
        self._huey.storage.close()

    async def reset(self) -> None:
        self._huey.flush()

    async def enqueue(self, i: int, sent_at: float) -> None:
        self._job(i, sent_at)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        result = self._answer(i, sent_at)
        return await asyncio.to_thread(result.get, blocking=True, timeout=timeout_s)

    async def unfinished(self) -> int:
        # a task leaves the queue when a worker takes it, and the probe saw every run start
        return int(self._huey.pending_count())

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        consumer = self._huey.create_consumer(
            workers=concurrency, worker_type="thread", periodic=False, check_worker_health=False
        )
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        async with remote.listening():
            consumer.start()
            for number, handler in handlers.items():  # the harness's, not the consumer's
                signal.signal(number, handler)
            try:
                yield
            finally:
                await asyncio.to_thread(consumer.stop, graceful=True)


class HueyRedis(Huey):
    library = "huey-redis"
    engine: ClassVar[Engine] = "redis"

    def connect(self, target: Target) -> Any:
        # a connection a worker thread (each blocks in its pop), redis-py's default cap is 100;
        # notify_result: a result waiter blocks on a pop instead of polling (huey 3's option)
        pool = ConnectionPool.from_url(target.url, max_connections=MAX_CONNECTIONS)
        return RedisHuey("bench", connection_pool=pool, blocking=True, notify_result=True)


class HueySqlite(Huey):
    library = "huey-sqlite"
    engine: ClassVar[Engine] = "sqlite"

    def connect(self, target: Target) -> Any:
        return SqliteHuey("bench", filename=urlsplit(target.url).path)
