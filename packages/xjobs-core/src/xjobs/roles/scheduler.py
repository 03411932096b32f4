"""The scheduler role: one dispatch round at a time, leadership trusted within `renew_every`, the drain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from xjobs.clock import Clock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import NewJob
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.stores import LeaderElection, SchedulerState
from xjobs.declare.job import EnqueueOptions
from xjobs.declare.occurrences import next_after, to_datetime
from xjobs.declare.task import TaskHandle
from xjobs.enqueue.facade import JobsFacade
from xjobs.errors import CapabilityMissingError, OptionInvalidError, WorkerStateError
from xjobs.ids import new_worker_id
from xjobs.roles.catch_up import plan_catch_up
from xjobs.roles.role import RoleState
from xjobs.roles.scheduler_options import SchedulerOptions
from xjobs.roles.scheduler_stats import SchedulerStats
from xjobs.roles.waker import Waker

log = logging.getLogger("xjobs.roles.scheduler")

FAILED_ROUND_FLOOR_MS = 500
# The leader folds minute counters into hours and days on taking the lead, then once an hour:
# one statement an hour keeps an idle scheduler within its budget of 6 a minute.
COUNTER_ROLLUP_INTERVAL_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class _Known:
    watermark_ms: int
    next_ms: int


def occurrence_key(occurrence_ms: int, job_key: str) -> str:
    """The idempotency key of a scheduled fire: one job per occurrence, whoever fires it."""
    return f"task:{occurrence_ms}:{job_key}"


class Scheduler:
    """Fires each registered task's occurrences through `SchedulerState.fire`, while it leads."""

    def __init__(
        self,
        *,
        backend: Backend,
        tasks: Mapping[str, TaskHandle],
        facade: JobsFacade,
        options: SchedulerOptions,
        clock: Clock,
        leader: LeaderElection | None = None,
        observer: Observer = NOOP,
    ) -> None:
        backend.require("scheduler")
        self._observer = observer
        elected = leader if leader is not None else backend.leader
        if elected is None:
            raise CapabilityMissingError(
                f"the {backend.name} backend has no leader election; pass leader="
            )
        assert backend.scheduler is not None
        self.id = new_worker_id()
        self.options = options
        self.stats = SchedulerStats(scheduler_id=self.id)
        self._store: SchedulerState = backend.scheduler
        self._backend = backend
        self._rollup_due_ms = 0
        self._leader = elected
        self._tasks = dict(tasks)
        self._facade = facade
        self._clock = clock
        self._state: RoleState = "new"
        self._accepting = False
        self._leading = False
        self._confirmed_at: int | None = None
        self._known: dict[str, _Known] = {}
        self._recheck_at: dict[str, int] = {}
        self._round: asyncio.Task[None] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._waker = Waker()
        self._done: asyncio.Future[None] | None = None
        self._drain_timeout_ms = options.drain_timeout_ms

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def state(self) -> RoleState:
        """Where the scheduler is in its lifecycle: new, running, draining or closed."""
        return self._state

    @property
    def leading(self) -> bool:
        """Whether the last answer of `still_leading()` was yes."""
        return self._leading

    async def start(self, *, until_idle: bool = False) -> None:
        """Start the dispatch loop: it campaigns for leadership and fires while it leads, until stopped."""
        if until_idle:
            raise OptionInvalidError("until_idle: a scheduler runs until it is stopped")
        if self._state != "new":
            raise WorkerStateError(f"scheduler {self.id} is {self._state}; a scheduler starts once")
        self._state = "running"
        self._accepting = True
        self._done = asyncio.get_running_loop().create_future()
        self._loop_task = asyncio.ensure_future(self._loop())
        log.info(
            "jobs.scheduler.started",
            extra={"scheduler_id": self.id, "tasks": ",".join(self._tasks)},
        )

    async def wait(self) -> None:
        """Until the scheduler stops accepting (phase one began) or its loop ends."""
        if self._done is None:
            raise WorkerStateError(f"scheduler {self.id} was never started")
        await asyncio.shield(self._done)

    def stop_accepting(self, *, drain_timeout_ms: int | None = None) -> None:
        """Phase one: no new round starts; the one in flight finishes, up to `drain_timeout_ms`
        (default `options.drain_timeout_ms`). Aborts nothing."""
        if self._state in ("draining", "closed"):
            return
        self._state = "draining"
        if drain_timeout_ms is not None:
            self._drain_timeout_ms = drain_timeout_ms
        self._accepting = False
        self._waker.kick()
        self._finish()

    def interrupt(self) -> None:
        """Cancel the round in flight now (a second SIGTERM); leadership is then not released."""
        self.stop_accepting()
        for task in (self._round, self._loop_task):
            if task is not None:
                task.cancel()

    async def close(self) -> None:
        """Phase two: wait out the round (up to the drain timeout), then release leadership.

        A round that does not finish in time is abandoned and leadership is NOT released: its
        lease lapses instead, so no other leader starts while a fire may still land.
        """
        if self._state == "closed":
            return
        self.stop_accepting()
        running = {t for t in (self._loop_task, self._round) if t is not None and not t.done()}
        abandoned = False
        if running:
            _, pending = await asyncio.wait(running, timeout=self._drain_timeout_ms / 1000)
            abandoned = bool(pending) or any(t.cancelled() for t in running)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if abandoned:
            log.warning("jobs.scheduler.drain-abandoned", extra={"scheduler_id": self.id})
        elif self._leading:
            try:
                await self._leader.release(self.id)
            except Exception:
                log.warning(
                    "jobs.scheduler.release-failed", extra={"scheduler_id": self.id}, exc_info=True
                )
        if self._leading and self._observer.enabled:
            self._observer.leader("scheduler", False)
        self._leading = False
        self._known.clear()
        self._state = "closed"
        self._finish()
        log.info("jobs.scheduler.stopped", extra={"scheduler_id": self.id, **self.stats.as_dict()})

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def stop(self) -> None:
        """Stop dispatching occurrences and close once the tick in flight is done."""
        self.stop_accepting()
        await self.close()

    # -- leadership --------------------------------------------------------------------------

    async def still_leading(self) -> bool:
        """Whether this scheduler leads: from memory within `renew_every` of the last renewal."""
        now = self._clock.now_ms()
        if (
            self._leading
            and self._confirmed_at is not None
            and now - self._confirmed_at < self.options.renew_every_ms
        ):
            return True
        try:
            leads = await self._leader.acquire(self.id, self.options.leader_ttl_ms)
        except Exception:
            log.warning(
                "jobs.scheduler.renew-failed", extra={"scheduler_id": self.id}, exc_info=True
            )
            leads = False
        if leads != self._leading:
            event = "jobs.scheduler.leading" if leads else "jobs.scheduler.leadership-lost"
            log.info(event, extra={"scheduler_id": self.id})
            if self._observer.enabled:
                self._observer.leader("scheduler", leads)
        if not leads:
            # Another leader may move the watermarks now: read them again on the next win.
            self._known.clear()
        self._leading = leads
        self._confirmed_at = now if leads else None
        return leads

    # -- the dispatch round ------------------------------------------------------------------

    async def tick(self) -> None:
        """Run one dispatch round, or join the one in flight."""
        if self._round is None or self._round.done():
            self._round = asyncio.ensure_future(self._dispatch_round())
        await asyncio.shield(self._round)

    async def _loop(self) -> None:
        failures = 0
        while self._accepting:
            try:
                await self.tick()
            except Exception:
                failures += 1
                log.warning(
                    "jobs.scheduler.round-failed", extra={"scheduler_id": self.id}, exc_info=True
                )
                self._known.clear()
                delay_ms = min(
                    FAILED_ROUND_FLOOR_MS * 2 ** (failures - 1), self.options.renew_every_ms
                )
            else:
                failures = 0
                delay_ms = max(self._next_wake_ms() - self._clock.now_ms(), 0)
            if self._observer.enabled:
                self._observer.loop_beat("scheduler", delay_ms / 1000)
            if self._accepting:
                await self._waker.wait(delay_ms / 1000)
        self._finish()

    def _next_wake_ms(self) -> int:
        """The next renewal, or the next occurrence or pause re-check, whichever comes first."""
        now = self._clock.now_ms()
        if not self._leading or self._confirmed_at is None:
            return now + self.options.renew_every_ms
        wake = self._confirmed_at + self.options.renew_every_ms
        for name, known in self._known.items():
            wake = min(wake, max(known.next_ms, self._recheck_at.get(name, 0)))
        return wake

    async def _dispatch_round(self) -> None:
        self.stats.rounds += 1
        if not await self.still_leading():
            return
        now = self._clock.now_ms()
        if now >= self._rollup_due_ms:
            await self._rollup(now)
        if len(self._known) < len(self._tasks):
            await self._load(now)
        due = [
            task
            for name, task in self._tasks.items()
            if self._known[name].next_ms <= now and self._recheck_at.get(name, 0) <= now
        ]
        if not due:
            return
        paused = await self._store.paused([task.name for task in due])
        for task in due:
            if task.name in paused:
                self._recheck_at[task.name] = now + self.options.pause_recheck_ms
                continue
            self._recheck_at.pop(task.name, None)
            if not await self.still_leading():
                return
            await self._dispatch(task, now)

    async def _rollup(self, now: int) -> None:
        """Fold closed minute counters into hour and day tiers (never fails the round)."""
        self._rollup_due_ms = now + COUNTER_ROLLUP_INTERVAL_MS
        ops = self._backend.introspection
        if ops is None:
            return
        try:
            folded = await ops.rollup_counters(now)
        except Exception:
            log.warning(
                "jobs.scheduler.rollup-failed", extra={"scheduler_id": self.id}, exc_info=True
            )
            return
        if folded:
            log.info("jobs.scheduler.rolled-up", extra={"scheduler_id": self.id, "buckets": folded})

    async def _load(self, now: int) -> None:
        """Read every watermark; a task seen for the first time is armed at now (its past never fires)."""
        marks = await self._store.watermarks(list(self._tasks))
        for name in self._tasks:
            watermark = marks.get(name)
            if watermark is None:
                if await self._store.arm(name, None, now):
                    log.info("jobs.scheduler.armed", extra={"task": name, "watermark_ms": now})
                    watermark = now
                else:  # another scheduler armed it first
                    watermark = (await self._store.watermarks([name]))[name]
            self._remember(name, watermark)

    def _remember(self, name: str, watermark_ms: int) -> None:
        task = self._tasks[name]
        self._known[name] = _Known(watermark_ms, next_after(task.cron, task.zone, watermark_ms))

    async def _reload(self, name: str) -> None:
        """The watermark moved under us (another leader, a race): trust the store's value."""
        self.stats.lost_races += 1
        marks = await self._store.watermarks([name])
        if name in marks:
            self._remember(name, marks[name])
        else:
            self._known.pop(name, None)

    async def _dispatch(self, task: TaskHandle, now: int) -> None:
        watermark = self._known[task.name].watermark_ms
        plan = plan_catch_up(task, watermark, now, self.options.misfire_grace_ms)
        if plan.arm_to is not None:
            if not await self._store.arm(task.name, watermark, plan.arm_to):
                await self._reload(task.name)
                return
            self.stats.skipped += 1
            log.info(
                "jobs.scheduler.skipped", extra={"task": task.name, "watermark_ms": plan.arm_to}
            )
            watermark = plan.arm_to
        for occurrence in plan.fires:
            if not await self.still_leading():
                return
            row = self._row(task, occurrence)
            if row is None:
                if not await self._store.arm(task.name, watermark, occurrence):
                    await self._reload(task.name)
                    return
            elif not await self._store.fire(task.name, watermark, occurrence, row):
                await self._reload(task.name)
                return
            else:
                self.stats.fired += 1
                if self._observer.enabled:
                    self._observer.cron_fired(task.name)
                    self._observer.enqueued(row.queue, row.name, 1)
                log.info(
                    "jobs.scheduler.fired",
                    extra={"task": task.name, "occurrence_ms": occurrence, "job_id": row.id},
                )
            watermark = occurrence
        self._remember(task.name, watermark)

    def _row(self, task: TaskHandle, occurrence_ms: int) -> NewJob | None:
        """The occurrence's job row; an input that cannot be built is logged and its occurrence passed."""
        try:
            value = task.input_for(to_datetime(occurrence_ms, task.zone))
            if self._observer.enabled:
                # the fire's PRODUCER span: the row stamps its context
                with self._observer.sending(task.job.queue, task.job.name, 1) as sending:
                    (row,) = self._facade.build(task.job, [value], EnqueueOptions())
                    sending.sent([row.id], 0)
            else:
                (row,) = self._facade.build(task.job, [value], EnqueueOptions())
        except Exception:
            self.stats.input_failed += 1
            log.exception(
                "jobs.scheduler.input-failed",
                extra={"task": task.name, "occurrence_ms": occurrence_ms},
            )
            return None
        return replace(row, idempotency_key=occurrence_key(occurrence_ms, row.idempotency_key))
