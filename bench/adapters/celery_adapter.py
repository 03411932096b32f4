"""Celery 5 on Redis (broker and result backend): `apply_async` from this process, a worker process
of its own (`celery worker --pool threads --concurrency N`), a chord for W11."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from celery import chord  # type: ignore[import-not-found,unused-ignore]
from redis.asyncio import Redis

from bench import remote
from bench.adapters import celery_tasks
from bench.contender import Contender, Engine, Target
from bench.cost import meter
from bench.probe import probe

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
STANDBY_QUEUE = "bench-standby"  # what a worker started before the window consumes: nothing


class Celery(Contender):
    """Celery has no bulk publish (a group sends one message a task): `enqueue_bulk` stays
    `Unsupported`. Its pool runs in the worker process, so a window's CPU counts that process
    tree (`meter.workers`); a drain starts it idle on an empty queue before the window and points
    it at the bench queue (`add_consumer`) as the window opens."""

    library = "celery"
    engine: ClassVar[Engine] = "redis"
    results = True
    _redis: Redis
    _url: str
    _process: asyncio.subprocess.Process | None = None
    _hostname = ""

    def version(self) -> str:
        return importlib.metadata.version("celery")

    async def open(self, target: Target) -> None:
        self._url = target.url
        celery_tasks.configure(target.url)
        self._redis = Redis.from_url(target.url)

    async def close(self) -> None:
        await self._redis.aclose()

    async def reset(self) -> None:
        await self._redis.flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        celery_tasks.job.apply_async((i, sent_at))

    async def round_trip(self, i: int, sent_at: float, timeout_s: float) -> object:
        result = celery_tasks.answer.apply_async((i, sent_at))
        return await asyncio.to_thread(result.get, timeout=timeout_s)

    async def fan_out(self, children: int, timeout_s: float) -> None:
        probe.reset(1)
        header = [celery_tasks.child.s() for _ in range(children)]
        joined = chord(header)(celery_tasks.joined.s(time.time()))
        await asyncio.wait_for(probe.done.wait(), timeout_s)
        joined.forget()  # its result, and the chord's counter

    async def unfinished(self) -> int:
        # the queue's list, and the messages a worker prefetched (unacked until they start)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.llen(celery_tasks.QUEUE)
            pipe.hlen("unacked")
            waiting, prefetched = await pipe.execute()
        return int(waiting) + int(prefetched)

    async def _start(self, concurrency: int, queue: str) -> None:
        self._hostname = f"bench{os.getpid()}-{time.monotonic_ns()}@localhost"
        self._process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "celery", "-A", "bench.adapters.celery_tasks", "worker"),
            *("--pool", "threads", "--concurrency", str(concurrency), "-Q", queue),
            *("-n", self._hostname, "--loglevel", "WARNING"),
            *("--without-gossip", "--without-mingle", "--without-heartbeat"),
            env={**os.environ, celery_tasks.URL_ENV: self._url},
            stdout=asyncio.subprocess.DEVNULL,  # its banner; this process's stdout is the report
        )
        pid = self._process.pid
        meter.workers = lambda: remote.tree_cpu_s(pid)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not await asyncio.to_thread(self._control, "ping", timeout=0.5):
            if time.monotonic() > deadline or self._process.returncode is not None:
                raise RuntimeError(
                    f"the celery worker did not start (exit {self._process.returncode})"
                )

    def _control(self, verb: str, **options: Any) -> Any:
        return getattr(celery_tasks.app.control, verb)(destination=[self._hostname], **options)

    async def _stop(self) -> None:
        process, self._process = self._process, None
        meter.workers = None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)  # Celery's warm shutdown
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()

    @contextlib.asynccontextmanager
    async def standby(self, concurrency: int) -> AsyncIterator[None]:
        async with remote.listening():
            await self._start(concurrency, STANDBY_QUEUE)
            try:
                yield
            finally:
                await self._stop()

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        if self._process is not None:  # started idle by `standby`: to work
            await asyncio.to_thread(
                self._control, "add_consumer", queue=celery_tasks.QUEUE, reply=True
            )
            yield
            return
        async with remote.listening():
            await self._start(concurrency, celery_tasks.QUEUE)
            try:
                yield
            finally:
                await self._stop()
