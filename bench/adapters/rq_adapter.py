"""RQ 2 on Redis: `Queue.enqueue` and `enqueue_many` from this process, and `rq worker-pool`
with a `SimpleWorker` process a slot (RQ runs one job at a time per worker; `SimpleWorker` runs
it in place instead of forking a process a job)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from redis import Redis
from rq import Queue, Worker  # type: ignore[import-not-found,unused-ignore]
from rq.registry import StartedJobRegistry  # type: ignore[import-not-found,unused-ignore]
from rq.suspension import resume, suspend  # type: ignore[import-not-found,unused-ignore]

from bench import remote
from bench.adapters import rq_tasks
from bench.contender import Contender, Engine, Target, Unsupported
from bench.cost import meter

QUEUE = "bench"
MAX_PROCESSES = 10  # a process a slot: W3 c=100 would be 100 processes on this 2-core machine
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class RQ(Contender):
    """Results off (`result_ttl=0`) but for W10, whose waiter is `Job.latest_result(timeout=…)`
    (it blocks on the job's result stream). The pool's processes are counted in a window's CPU
    (`meter.workers`); a drain starts them suspended (`rq suspend`) before the window and
    resumes them as it opens (a suspended worker looks again each second)."""

    library = "rq"
    engine: ClassVar[Engine] = "redis"
    results = True
    _redis: Redis
    _queue: Any
    _url: str
    _pool: asyncio.subprocess.Process | None = None

    def version(self) -> str:
        return importlib.metadata.version("rq")

    async def open(self, target: Target) -> None:
        self._url = target.url
        self._redis = Redis.from_url(target.url)
        self._queue = Queue(QUEUE, connection=self._redis)

    async def close(self) -> None:
        self._redis.close()

    async def reset(self) -> None:
        self._redis.flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        self._queue.enqueue(rq_tasks.bench_job, i, sent_at, result_ttl=0)

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        prepared = [
            Queue.prepare_data(rq_tasks.bench_job, args=(i, sent_at), result_ttl=0)
            for i, sent_at in items
        ]
        self._queue.enqueue_many(prepared)

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        job = self._queue.enqueue(rq_tasks.bench_answer, i, sent_at)
        result = await asyncio.to_thread(job.latest_result, timeout=int(timeout_s))
        return None if result is None else result.return_value

    async def unfinished(self) -> int:
        started = StartedJobRegistry(QUEUE, connection=self._redis)
        return int(self._queue.count) + int(started.count)

    async def _start(self, concurrency: int) -> None:
        if concurrency > MAX_PROCESSES:
            raise Unsupported(f"a process a slot: {concurrency} processes do not fit this machine")
        self._pool = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "rq.cli", "worker-pool", QUEUE, "-n", str(concurrency)),
            *("-w", "rq.worker.SimpleWorker", "--url", self._url, "-l", "WARNING"),
            stdout=asyncio.subprocess.DEVNULL,
        )
        pid = self._pool.pid
        meter.workers = lambda: remote.tree_cpu_s(pid)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while Worker.count(connection=self._redis) < concurrency:
            if time.monotonic() > deadline or self._pool.returncode is not None:
                raise RuntimeError("the rq worker pool did not start")
            await asyncio.sleep(0.05)

    async def _stop(self) -> None:
        pool, self._pool = self._pool, None
        meter.workers = None
        if pool is None or pool.returncode is not None:
            return
        pool.send_signal(signal.SIGTERM)  # a warm shutdown: each worker ends its job
        try:
            await asyncio.wait_for(pool.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            pool.kill()
            await pool.wait()

    @contextlib.asynccontextmanager
    async def standby(self, concurrency: int) -> AsyncIterator[None]:
        async with remote.listening():
            suspend(self._redis)
            try:
                await self._start(concurrency)
                yield
            finally:
                resume(self._redis)
                await self._stop()

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        if self._pool is not None:  # started suspended by `standby`: to work
            resume(self._redis)
            yield
            return
        async with remote.listening():
            await self._start(concurrency)
            try:
                yield
            finally:
                await self._stop()
