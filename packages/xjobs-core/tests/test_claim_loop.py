"""The worker's claim loop, one chain (semantics.md, "The worker"): a failed pass re-arms at the
floor, a wake during a pass sets `again`, a due retry kicks one pass at its time, and the asks
rotate across the queues. Run on an event loop whose clock jumps to its next timer whenever nothing
else is ready, so every wait is measured in loop time, exactly, and none is slept."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job
from xjobs.contract.driver import ClaimOptions, ClaimResult, JobDriver
from xjobs.contract.observer import NoopObserver
from xjobs.roles.worker import Worker
from xjobs.roles.worker_options import resolve_worker_options

EPOCH_MS = 1_767_225_600_000
FLOOR = timedelta(milliseconds=50)
TWO_S = timedelta(
    seconds=2
)  # the longest floor: an idle wait of 2 s, then 4 s, then the 5 s ceiling


class JumpingLoop(asyncio.SelectorEventLoop):
    """An event loop on a clock of its own: when nothing is ready it jumps to the next timer."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        selector = self._selector  # type: ignore[attr-defined]
        real_select = selector.select

        def select(timeout: float | None = None) -> Any:
            ready = real_select(None if timeout is None else 0)
            if not ready and timeout is not None:
                self._now += timeout
            return ready

        selector.select = select

    def time(self) -> float:
        return self._now


class LoopClock:
    """The durable clock read off the jumping loop, so a retry's run_at is due on its timers."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now_ms(self) -> int:
        return EPOCH_MS + round(self._loop.time() * 1000)


def on_jumping_loop(scenario: Callable[[JumpingLoop], Coroutine[Any, Any, None]]) -> None:
    loop = JumpingLoop()
    try:
        loop.run_until_complete(scenario(loop))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


@dataclass
class Pass:
    """One claim pass as the driver saw it: when (loop seconds), what was asked, what was taken."""

    at: float
    asks: list[tuple[str, int]]
    limit: int | None
    took: int = 0


@dataclass
class PassLog:
    """The memory backend's job driver, noting each pass; it can fail or hold the next ones."""

    inner: JobDriver
    loop: asyncio.AbstractEventLoop
    passes: list[Pass] = field(default_factory=list)
    failing: int = 0
    hold_next: bool = False
    in_flight: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        seen = Pass(self.loop.time(), list(options.queues.items()), options.limit)
        self.passes.append(seen)
        if self.failing > 0:
            self.failing -= 1
            raise ConnectionError("the store did not answer the claim")
        if self.hold_next:
            self.hold_next = False
            self.in_flight.set()
            await self.release.wait()
        result = await self.inner.claim(options)
        seen.took = len(result.jobs)
        return result


class Beats(NoopObserver):
    """An observer that notes each claim-loop beat: the wait it armed after a pass, in seconds."""

    enabled = True

    def __init__(self) -> None:
        self.waits: list[float] = []

    def loop_beat(self, role: str, next_within_s: float) -> None:
        if role == "worker":
            self.waits.append(next_within_s)


class Nothing(BaseModel):
    pass


class StoreBlip(Exception):
    """An error that asks the retry to wait one second, exactly (the backoff itself is zero)."""

    retry_after_ms = 1_000


RAN: list[float] = []


@job(
    tenant="none",
    idempotency_key=lambda _: "once",
    queue="loop",
    retry=Retry(attempts=2, base=timedelta(0), cap=timedelta(0)),
)
async def flaky(ctx: JobContext, input: Nothing) -> None:
    RAN.append(asyncio.get_running_loop().time())
    if len(RAN) == 1:
        raise StoreBlip("the first attempt fails")


async def _worker(
    loop: asyncio.AbstractEventLoop, queues: list[str], **knobs: Any
) -> tuple[xjobs.App, Worker, PassLog, Beats]:
    clock = LoopClock(loop)
    backend = await xjobs.connect("memory://", clock=clock)
    log = PassLog(backend.jobs, loop)
    app = xjobs.App(replace(backend, jobs=log), jobs=[flaky], clock=clock, retention=None)  # type: ignore[arg-type]
    await app.__aenter__()
    beats = Beats()
    worker = Worker(
        backend=app.backend,
        registry=app.registry,
        options=resolve_worker_options(queues=queues, **knobs),
        clock=clock,
        observer=beats,
    )
    return app, worker, log, beats


async def _until(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(10_000):  # loop turns, not time: the loop's clock jumps while this waits
        if predicate():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


def _s(seconds: float) -> float:
    """Loop seconds to the millisecond (the loop's clock adds floats)."""
    return round(seconds, 3)


async def _stopped(app: xjobs.App, worker: Worker) -> None:
    await worker.stop()
    await app.__aexit__(None, None, None)


def test_a_failed_pass_re_arms_at_the_floor_then_backs_off() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        app, worker, log, beats = await _worker(loop, ["loop"], poll_floor=FLOOR)
        await worker.start()
        # the memory backend's wake is live: the idle ceiling is 5 s
        await _until(lambda: 5.0 in beats.waits, "the idle waits grow to the ceiling")
        grown = len(beats.waits)
        log.failing = 2
        await _until(lambda: len(beats.waits) >= grown + 3, "two failed passes and one more")
        await _stopped(app, worker)
        # empty passes: 50 ms doubling to the ceiling; the first failure re-arms at the floor,
        # the second backs off from it, and the recovered empty pass goes on doubling.
        assert beats.waits[:grown] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
        assert beats.waits[grown : grown + 3] == [0.05, 0.1, 0.2]
        failed_at = log.passes[grown].at
        assert [_s(p.at - failed_at) for p in log.passes[grown : grown + 3]] == [0.0, 0.05, 0.15]

    on_jumping_loop(scenario)


def test_a_wake_during_a_pass_sets_again_so_the_next_pass_follows_at_once() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        app, worker, log, beats = await _worker(loop, ["loop"], poll_floor=TWO_S)
        log.hold_next = True
        await worker.start()
        await _until(log.in_flight.is_set, "the first pass to be in flight")
        assert app.backend.wake is not None
        app.backend.wake.emit("loop")  # no wait is armed: the kick is kept as `again`
        released_at = loop.time()
        log.release.set()
        await _until(lambda: len(log.passes) >= 3, "two passes after the held one")
        await _stopped(app, worker)
        first, second, third = log.passes[:3]
        assert beats.waits[:2] == [2.0, 4.0]  # an empty pass arms a 2 s wait...
        assert first.at <= released_at  # the first pass was held until then
        assert (
            second.at == released_at
        )  # ...a wait the wake that came during the pass ended at once
        assert _s(third.at - second.at) == 4.0  # and only once: the next wait is waited out

    on_jumping_loop(scenario)


def test_a_due_retry_kicks_one_pass_at_its_time() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        RAN.clear()
        app, worker, log, _ = await _worker(loop, ["loop"], poll_floor=TWO_S)
        enqueued = await flaky.enqueue(Nothing())
        await worker.start()
        await _until(lambda: len(RAN) == 2, "the retry to run")
        await _until(lambda: (loop.time() - RAN[1]) >= 2.0, "the loop to idle on")
        record = await app.get_job(enqueued.job_id)
        await _stopped(app, worker)
        took = [(_s(p.at - RAN[0]), p.took) for p in log.passes]
        assert record.state == "completed"
        # the first run fails; its freed slot kicks a pass that finds nothing due; the retry's
        # own timer kicks the pass that takes it one second later, before the 2 s poll would.
        assert took[:4] == [(0.0, 1), (0.0, 0), (1.0, 1), (1.0, 0)]
        assert _s(RAN[1] - RAN[0]) == 1.0

    on_jumping_loop(scenario)


def test_the_asks_of_each_pass_rotate_across_the_queues() -> None:
    async def scenario(loop: JumpingLoop) -> None:
        app, worker, log, _ = await _worker(
            loop, ["a", "b", "c"], poll_floor=FLOOR, concurrency={"a": 1, "b": 2, "c": 3}
        )
        await worker.start()
        await _until(lambda: len(log.passes) >= 4, "four passes")
        await _stopped(app, worker)
        assert [p.asks for p in log.passes[:4]] == [
            [("a", 1), ("b", 2), ("c", 3)],
            [("b", 2), ("c", 3), ("a", 1)],
            [("c", 3), ("a", 1), ("b", 2)],
            [("a", 1), ("b", 2), ("c", 3)],
        ]
        assert {p.limit for p in log.passes} == {6}

    on_jumping_loop(scenario)
