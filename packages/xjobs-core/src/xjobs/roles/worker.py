"""The worker role: the claim loop (one chain), slots and kicks, and the two-phase drain."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import ClaimedJob, ClaimOptions
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.stores import WorkerInfo
from xjobs.declare.registry import Registry
from xjobs.errors import DrainingError, WorkerStateError
from xjobs.ids import new_worker_id
from xjobs.roles.idle_wait import IdleBackoff
from xjobs.roles.role import RoleState
from xjobs.roles.waker import Waker
from xjobs.roles.worker_options import WorkerOptions
from xjobs.roles.worker_stats import WorkerStats
from xjobs.run.ack_batch import AckBatcher
from xjobs.run.admit import RateGate, assert_enforceable
from xjobs.run.claimed import RunWiring, announce_buried, run_claimed
from xjobs.run.execute import start_eagerly
from xjobs.run.local_rates import LocalRates
from xjobs.run.settle import Settler
from xjobs.run.settled import SettledHook
from xjobs.run.signal import RunSignal
from xjobs.run.threads import BodyThreads

log = logging.getLogger("xjobs.roles.worker")


# A run is keyed by its claim, never by its job alone: a job this worker reclaims while an earlier
# run of it still lives (a body that ignored the cancellation of its lost lease) is a second run.
RunKey = tuple[str, int]


class _Run:
    """One claimed job in this worker: its signal and the task running it."""

    __slots__ = ("job", "key", "signal", "task")

    def __init__(self, job: ClaimedJob) -> None:
        self.job = job
        self.key: RunKey = (job.run_id, job.claims)
        self.signal = RunSignal()
        self.task: asyncio.Task[None] | None = None


class Worker:
    """Claims jobs from its queues and runs each through `execute_job`, up to its slots."""

    def __init__(
        self,
        *,
        backend: Backend,
        registry: Registry,
        options: WorkerOptions,
        clock: Clock,
        hooks: tuple[SettledHook, ...] = (),
        observer: Observer = NOOP,
    ) -> None:
        self.id = new_worker_id()
        self._observer = observer
        self.options = options
        self.stats = WorkerStats(worker_id=self.id)
        self._backend = backend
        self._driver = backend.jobs
        self._registry = registry
        self._clock = clock
        acks = AckBatcher(backend)
        self._settler = Settler(
            backend.jobs,
            clock,
            hooks=hooks,
            ack=acks.ack if acks.batches else backend.jobs.ack,
            events=backend.events,
            results=backend.results,
            observer=observer,
        )
        self._wiring = RunWiring(
            backend=backend,
            registry=registry,
            clock=clock,
            settler=self._settler,
            lease_ms=options.lease_ms,
            heartbeat_ms=options.heartbeat_ms,
            threads=BodyThreads(options.threads),
            rates=RateGate(
                backend.rates, LocalRates(clock), options.queue_rates, options.global_rates
            ),
        )
        self._state: RoleState = "new"
        self._accepting = False
        self._until_idle = False
        self._waker = Waker()
        wake = backend.wake
        self._backoff = IdleBackoff(options.poll_floor_ms, lambda: wake is not None and wake.live)
        self._in_flight = dict.fromkeys(options.queues, 0)
        self._open_queues = sum(1 for q in options.queues if options.concurrency[q] > 0)
        self._runs: dict[RunKey, _Run] = {}
        self._side: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._due_timer: asyncio.TimerHandle | None = None
        self._due_at: int | None = None
        self._unsubscribe: Any = None
        self._rotation = 0
        self._failing = False
        self._last_presence = time.monotonic()
        self._done: asyncio.Future[None] | None = None
        self._abandon_at: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def state(self) -> RoleState:
        """Where the worker is in its lifecycle: new, running, draining or closed."""
        return self._state

    @property
    def running_jobs(self) -> int:
        """How many claimed jobs are running in this worker right now."""
        return len(self._runs)

    async def start(self, *, until_idle: bool = False) -> None:
        """Announce this worker and start the claim loop."""
        if self._state != "new":
            raise WorkerStateError(f"worker {self.id} is {self._state}; a worker starts once")
        served = [h for h in self._registry.jobs.values() if h.queue in self.options.queues]
        assert_enforceable(served, self._backend.slots, self._wiring.rates)
        self._state = "running"
        self._accepting = True
        self._until_idle = until_idle
        self._done = asyncio.get_running_loop().create_future()
        if self._backend.workers is not None:
            now = self._clock.now_ms()
            info = WorkerInfo(
                self.id, socket.gethostname(), os.getpid(), self.options.queues, now, now
            )
            await self._backend.workers.announce(info, self.options.presence_ttl_ms)
        if self._backend.wake is not None:
            self._unsubscribe = self._backend.wake.subscribe(self._on_wake)
        self._loop_task = asyncio.ensure_future(self._loop())
        log.info(
            "jobs.worker.started",
            extra={
                "worker_id": self.id,
                "queues": ",".join(self.options.queues),
                "backend": self._backend.name,
                "pid": os.getpid(),
            },
        )

    async def wait(self) -> None:
        """Until the loop ends: idle (with `until_idle`) or stopped."""
        if self._done is None:
            raise WorkerStateError(f"worker {self.id} was never started")
        await asyncio.shield(self._done)

    def stop_accepting(self, *, drain_timeout_ms: int | None = None) -> None:
        """Phase one: stop claiming and clear the poll timer; with a timeout, arm the drain cut-off. Aborts nothing."""
        if self._state != "running":
            return
        self._state = "draining"
        self._accepting = False
        self._waker.kick()
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        if drain_timeout_ms is not None:
            cutoff_s = max(drain_timeout_ms - self.options.drain_margin_ms, 0) / 1000
            self._drain_timer = asyncio.get_running_loop().call_later(cutoff_s, self.interrupt)
            self._abandon_at = time.monotonic() + drain_timeout_ms / 1000

    def interrupt(self) -> None:
        """The drain cut-off (or a second SIGTERM): claiming stops, and every running job's signal
        aborts with `XJOBS_DRAINING`, to settle `interrupted`."""
        self.stop_accepting()
        for run in list(self._runs.values()):
            run.signal.abort(DrainingError(f"worker {self.id} is shutting down"))

    async def close(self) -> None:
        """Phase two: wait out the claim round and the running jobs, then forget this worker (joined)."""
        if self._state == "closed":
            return
        self.stop_accepting()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)
        await self._join_runs()
        if self._wiring.rates is not None:
            await self._wiring.rates.close()
        if self._side:
            await asyncio.gather(*self._side, return_exceptions=True)
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._backend.workers is not None:
            try:
                await self._backend.workers.forget(self.id)
            except Exception:
                log.warning(
                    "jobs.worker.forget-failed", extra={"worker_id": self.id}, exc_info=True
                )
        self._state = "closed"
        self._finish()

    async def _join_runs(self) -> None:
        """Wait for the running jobs: unbounded on `stop()`, until the drain deadline on SIGTERM."""
        tasks = [run.task for run in self._runs.values() if run.task is not None]
        if not tasks:
            return
        if self._abandon_at is None:
            await asyncio.gather(*tasks, return_exceptions=True)
            return
        timeout = max(self._abandon_at - time.monotonic(), 0) + self.options.drain_margin_ms / 1000
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        if pending:
            # A body that ignores its cancellation is left behind; its lease lapses and it is reclaimed.
            log.warning(
                "jobs.worker.drain-abandoned", extra={"worker_id": self.id, "runs": len(pending)}
            )
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=self.options.drain_margin_ms / 1000 or 0.1)

    async def stop(self) -> None:
        """Stop claiming and let every running job finish (unbounded), then close."""
        self.stop_accepting()
        await self.close()

    async def drain(self, timeout_ms: int | None = None) -> None:
        """SIGTERM's shutdown: running jobs may finish until the cut-off, then are interrupted."""
        self.stop_accepting(
            drain_timeout_ms=self.options.drain_timeout_ms if timeout_ms is None else timeout_ms
        )
        await self.close()

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    # -- the claim loop ----------------------------------------------------------------------

    def _on_wake(self, queue: str | None) -> None:
        if queue is None or queue in self._in_flight:
            self._backoff.reset()
            self._waker.kick()

    def _budget(self) -> int:
        """How many more jobs this process may take (`max_in_flight`, checked before the claim)."""
        return max(self.options.max_in_flight - len(self._runs), 0)

    def _asks(self) -> dict[str, int]:
        """Free slots per queue, each capped by the process budget; the claim's `limit` caps the sum."""
        budget = self._budget()
        if budget == 0:
            return {}
        queues = self.options.queues
        start = self._rotation % len(queues)
        self._rotation += 1
        asks: dict[str, int] = {}
        for queue in queues[start:] + queues[:start]:
            free = min(self.options.concurrency[queue] - self._in_flight[queue], budget)
            if free > 0:
                asks[queue] = free
        return asks

    async def _loop(self) -> None:
        while self._accepting:
            asks = self._asks()
            asked = min(sum(asks.values()), self._budget())
            settling = len(self._runs)  # a run that settles during the pass may leave a retry due
            try:
                got = await self._pass(asks) if asks else 0
            except Exception as exc:
                # A failed pass re-arms at the floor; failing again, it backs off to the ceiling,
                # so an outage neither spins the loop nor floods the log.
                if self._failing:
                    log.warning(
                        "jobs.worker.pass-failed", extra={"worker_id": self.id, "error": repr(exc)}
                    )
                    delay_ms = self._backoff.next_ms()
                else:
                    log.exception("jobs.worker.pass-failed", extra={"worker_id": self.id})
                    self._backoff.reset()
                    delay_ms = self._backoff.next_ms()
                self._failing = True
            else:
                if self._failing:
                    log.info("jobs.worker.pass-recovered", extra={"worker_id": self.id})
                    self._failing = False
                next_delay_ms = self._delay_after_pass(asks, asked, got, settling)
                if next_delay_ms is None:
                    break
                if not asks:
                    await self._keep_presence()
                delay_ms = next_delay_ms
            if self._observer.enabled:
                self._observer.loop_beat("worker", delay_ms / 1000)
            if self._accepting and delay_ms > 0:
                await self._waker.wait(delay_ms / 1000)
            elif self._accepting:
                await asyncio.sleep(0)  # runs started eagerly may never wait: others get a turn
        self._finish()

    def _delay_after_pass(
        self, asks: dict[str, int], asked: int, got: int, settling: int
    ) -> int | None:
        """How long the claim loop waits after a pass that took `got` of `asked`; `None` ends the loop.

        The loop ends only with `until_idle`, once nothing is running and no pass can find work.
        """
        if not asks:
            if self._until_idle and not self._runs:
                return None  # no slot at all (a zero limit is a hard stop): nothing will ever run
            return self.options.presence_ttl_ms // 3  # every slot is busy: a freed slot kicks
        if got >= asked:
            self._backoff.reset()
            return 0
        if got > 0:
            self._backoff.reset()
            return self._backoff.floor_ms
        if self._until_idle and not self._runs:
            if len(asks) == self._open_queues and not settling:
                return None  # every queue was asked, none had work, and nothing was running
            return 0  # a queue was left out, or a run settled meanwhile: ask again
        return self._backoff.next_ms()

    async def _keep_presence(self) -> None:
        """A full worker claims nothing: refresh the registry row on its own once a third of its TTL passed."""
        workers = self._backend.workers
        if (
            workers is None
            or time.monotonic() - self._last_presence < self.options.presence_ttl_ms / 3000
        ):
            return
        self._last_presence = time.monotonic()
        try:
            await workers.beat(self.id, self.options.presence_ttl_ms)
        except Exception:
            log.warning("jobs.worker.presence-failed", extra={"worker_id": self.id}, exc_info=True)

    async def _pass(self, asks: dict[str, int]) -> int:
        """One claim over every queue with a free slot; answers how many jobs it took."""
        options = ClaimOptions(
            self.id, asks, self.options.lease_ms, self.options.presence_ttl_ms, limit=self._budget()
        )
        result = await self._driver.claim(options)
        self._last_presence = time.monotonic()
        self.stats.claimed += len(result.jobs)
        self.stats.buried += len(result.buried)
        for buried in result.buried:
            self._spawn_side(announce_buried(self._wiring, buried))
        if not self._accepting:
            # The drain raced this round: what it claimed goes back, uncounted.
            for job in result.jobs:
                await self._hand_back(job)
            return len(result.jobs)
        for job in result.jobs:
            self._start(job)
        return len(result.jobs)

    def _spawn_side(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    async def _hand_back(self, job: ClaimedJob) -> None:
        try:
            if await self._settler.hand_back(job):
                self.stats.handed_back += 1
        except Exception:
            log.warning("jobs.worker.hand-back-failed", extra={"job_id": job.id}, exc_info=True)

    # -- one run -----------------------------------------------------------------------------

    def _start(self, job: ClaimedJob) -> None:
        run = _Run(job)
        self._runs[run.key] = run
        self._in_flight[job.queue] = self._in_flight.get(job.queue, 0) + 1
        # Started eagerly: a run that never waits (an in-process store, a quick body) is over
        # before the next job of the pass starts, and costs the loop no turn of its own.
        run.task = start_eagerly(self._run(run))

    async def _run(self, run: _Run) -> None:
        job = run.job
        try:
            execution = await run_claimed(self._wiring, job, run.signal)
            self.stats.count(execution.outcome)
            if execution.resume_at_ms is not None:
                self._kick_at(execution.resume_at_ms)
        except Exception:
            # The settle itself failed (the store is unreachable): the lease lapses and the job is reclaimed.
            log.exception("jobs.worker.run-failed", extra={"job_id": job.id, "job": job.name})
        finally:
            del self._runs[run.key]
            self._in_flight[job.queue] -= 1
            self._waker.kick()  # a freed slot kicks one pass

    def _kick_at(self, at_ms: int) -> None:
        """A due retry kicks one pass at its time; only the earliest pending one needs a timer."""
        if not self._accepting or (self._due_at is not None and self._due_at <= at_ms):
            return
        if self._due_timer is not None:
            self._due_timer.cancel()
        self._due_at = at_ms
        delay_s = max(at_ms - self._clock.now_ms(), 0) / 1000
        self._due_timer = asyncio.get_running_loop().call_later(delay_s, self._kick_due)

    def _kick_due(self) -> None:
        self._due_timer = None
        self._due_at = None
        self._waker.kick()
