"""The memory backend's plugin: registered through the `xjobs` entry point like every other driver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from xjobs.clock import Clock, SystemClock
from xjobs.contract.backend import Backend, WakeSource
from xjobs.contract.factory import BackendFactory
from xjobs.contract.hookspecs import hookimpl
from xjobs.memory.backfills import MemoryBackfillLedger
from xjobs.memory.children import MemoryChildStore
from xjobs.memory.driver import MemoryJobDriver
from xjobs.memory.events import MemoryEventBus
from xjobs.memory.introspection import MemoryIntrospection
from xjobs.memory.outbox import MemoryOutboxStore
from xjobs.memory.rates import MemoryRateStore
from xjobs.memory.results import MemoryResults
from xjobs.memory.retention import MemoryRetention
from xjobs.memory.scheduler import MemoryLeader, MemorySchedulerState
from xjobs.memory.slots import MemorySlotStore
from xjobs.memory.steps import MemoryStepStore
from xjobs.memory.webhooks import MemoryWebhookLedger
from xjobs.memory.workers import MemoryWorkerRegistry

_named: dict[str, Backend] = {}


def _fresh(url: str, clock: Clock) -> Backend:
    workers = MemoryWorkerRegistry(clock)
    wake = WakeSource()
    wake.set_live(True)  # in one process the hint cannot be lost, so it needs no probe
    jobs = MemoryJobDriver(clock, workers, wake)
    events = MemoryEventBus(clock, jobs)
    children = MemoryChildStore(clock, jobs)
    return Backend(
        name="memory",
        url=url,
        clock=clock,
        jobs=jobs,
        workers=workers,
        slots=MemorySlotStore(clock),
        rates=MemoryRateStore(clock),
        webhooks=MemoryWebhookLedger(),
        steps=MemoryStepStore(jobs),
        events=events,
        outbox=MemoryOutboxStore(clock, wake),
        scheduler=MemorySchedulerState(clock, jobs),
        leader=MemoryLeader(clock),
        introspection=MemoryIntrospection(clock, jobs),
        results=MemoryResults(jobs),
        wake=wake,
        retention=MemoryRetention(jobs, events, workers, children),
        children=children,
        backfills=MemoryBackfillLedger(clock),
        features=frozenset({"ack_many"}),
    )


async def open_backend(url: str, *, clock: Clock | None = None, **_: Any) -> Backend:
    """`memory://` is a new empty store; `memory://NAME` is one store per name within this process."""
    name = urlsplit(url).netloc
    clock = clock or SystemClock()
    if not name:
        return _fresh(url, clock)
    backend = _named.get(name)
    if backend is None:
        backend = _named[name] = _fresh(url, clock)
    return backend


@asynccontextmanager
async def test_backend(clock: Clock) -> AsyncIterator[Backend]:
    """A fresh store for one test: nothing is shared, so nothing can leak."""
    backend = _fresh("memory://", clock)
    try:
        yield backend
    finally:
        await backend.close()


@hookimpl
def xjobs_backends() -> list[BackendFactory]:
    """The built-in in-process backend, registered through the same hook as every driver."""
    return [
        BackendFactory(
            name="memory",
            schemes=("memory",),
            open=open_backend,
            test_backend="xjobs.memory.plugin:test_backend",
            description="in-process store, for development and tests; nothing survives the process",
        )
    ]
