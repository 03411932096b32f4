"""The relay role: claims staged outbox rows, publishes them through `driver.enqueue`, marks them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import JobDriver
from xjobs.contract.observer import NOOP, Observer
from xjobs.contract.stores import OUTBOX_WAKE, OutboxStore
from xjobs.errors import WorkerStateError
from xjobs.ids import new_worker_id
from xjobs.roles.idle_wait import IdleBackoff
from xjobs.roles.relay_options import RelayOptions
from xjobs.roles.relay_stats import RelayStats
from xjobs.roles.role import RoleState
from xjobs.roles.waker import Waker

log = logging.getLogger("xjobs.roles.relay")


class Relay:
    """Publishes the outbox into the app's queue backend, a pass at a time, backing off when idle.

    A row is published before it is marked, so a relay that dies between the two leaves it
    claimed; once the lease lapses another relay publishes it again and `enqueue` dedupes the
    repeated id — the job runs once.
    """

    def __init__(
        self,
        *,
        outbox: OutboxStore,
        jobs: JobDriver,
        options: RelayOptions,
        wake: WakeSource | None = None,
        observer: Observer = NOOP,
    ) -> None:
        self.id = new_worker_id()
        self._observer = observer
        self.options = options
        self.stats = RelayStats(relay_id=self.id)
        self._outbox = outbox
        self._jobs = jobs
        self._wake = wake
        self._backoff = IdleBackoff(options.poll_floor_ms, lambda: wake is not None and wake.live)
        self._waker = Waker()
        self._state: RoleState = "new"
        self._accepting = False
        self._until_idle = False
        self._loop_task: asyncio.Task[None] | None = None
        self._unsubscribe: Any = None
        self._done: asyncio.Future[None] | None = None
        self._drain_timeout_ms = options.drain_timeout_ms

    @property
    def state(self) -> RoleState:
        """Where the relay is in its lifecycle: new, running, draining or closed."""
        return self._state

    async def start(self, *, until_idle: bool = False) -> None:
        """Start the relay loop; with `until_idle`, it ends after the first pass that finds nothing."""
        if self._state != "new":
            raise WorkerStateError(f"relay {self.id} is {self._state}; a relay starts once")
        self._state = "running"
        self._accepting = True
        self._until_idle = until_idle
        self._done = asyncio.get_running_loop().create_future()
        if self._wake is not None:
            self._unsubscribe = self._wake.subscribe(self._on_wake)
        self._loop_task = asyncio.ensure_future(self._loop())
        log.info("jobs.relay.started", extra={"relay_id": self.id})

    async def wait(self) -> None:
        """Until the relay stops accepting, or its loop ends (idle, with `until_idle`)."""
        if self._done is None:
            raise WorkerStateError(f"relay {self.id} was never started")
        await asyncio.shield(self._done)

    def stop_accepting(self, *, drain_timeout_ms: int | None = None) -> None:
        """Phase one: no new pass starts; the one in flight finishes, up to `drain_timeout_ms`
        (default `options.drain_timeout_ms`). Aborts nothing."""
        if self._state not in ("new", "running"):
            return
        self._state = "draining"
        if drain_timeout_ms is not None:
            self._drain_timeout_ms = drain_timeout_ms
        self._accepting = False
        self._waker.kick()
        self._finish()

    def interrupt(self) -> None:
        """Cancel the pass in flight now (a second SIGTERM): its rows are retaken after the lease."""
        self.stop_accepting()
        if self._loop_task is not None:
            self._loop_task.cancel()

    async def close(self) -> None:
        """Phase two: wait out the pass in flight, up to the drain timeout, then detach from the wake."""
        if self._state == "closed":
            return
        self.stop_accepting()
        task = self._loop_task
        if task is not None and not task.done():
            _, pending = await asyncio.wait({task}, timeout=self._drain_timeout_ms / 1000)
            if pending:
                log.warning("jobs.relay.drain-abandoned", extra={"relay_id": self.id})
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._state = "closed"
        self._finish()
        log.info("jobs.relay.stopped", extra={"relay_id": self.id, **self.stats.as_dict()})

    async def stop(self) -> None:
        """Stop taking outbox rows and close once the pass in flight is done."""
        self.stop_accepting()
        await self.close()

    def _finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _on_wake(self, payload: str | None) -> None:
        if payload is None or payload == OUTBOX_WAKE:
            self._backoff.reset()
            self._waker.kick()

    async def _loop(self) -> None:
        failing = False
        while self._accepting:
            try:
                got = await self.run_pass()
            except Exception:
                if not failing:
                    log.exception("jobs.relay.pass-failed", extra={"relay_id": self.id})
                    self._backoff.reset()
                failing = True
                delay_ms = self._backoff.next_ms()
            else:
                if failing:
                    log.info("jobs.relay.pass-recovered", extra={"relay_id": self.id})
                    failing = False
                if got >= self.options.batch:
                    self._backoff.reset()
                    delay_ms = 0
                elif got > 0:
                    self._backoff.reset()
                    delay_ms = self._backoff.floor_ms
                elif self._until_idle:
                    break
                else:
                    delay_ms = self._backoff.next_ms()
            if self._observer.enabled:
                self._observer.loop_beat("relay", delay_ms / 1000)
            if self._accepting and delay_ms > 0:
                await self._waker.wait(delay_ms / 1000)
        self._finish()

    async def run_pass(self) -> int:
        """One claim, publish and mark; answers how many rows it claimed."""
        self.stats.passes += 1
        rows = await self._outbox.claim(self.id, self.options.batch, self.options.lease_ms)
        if not rows:
            return 0
        if self._observer.enabled:
            with self._observer.relaying(rows):
                results = await self._jobs.enqueue(rows)
            for row, result in zip(rows, results, strict=True):
                if not result.deduped:
                    self._observer.published(row.queue, 1)
                    self._observer.enqueued(row.queue, row.name, 1)
        else:
            results = await self._jobs.enqueue(rows)
        marked = await self._outbox.mark_published(self.id, [row.id for row in rows])
        deduped = sum(1 for r in results if r.deduped)
        self.stats.published += len(results) - deduped
        self.stats.deduped += deduped
        if marked < len(rows):
            # Another relay retook a lapsed lease meanwhile; it publishes again, deduped by id.
            self.stats.lost += len(rows) - marked
            log.warning(
                "jobs.relay.mark-lost", extra={"relay_id": self.id, "rows": len(rows) - marked}
            )
        for row, result in zip(rows, results, strict=True):
            log.debug(
                "jobs.relay.published",
                extra={"relay_id": self.id, "job_id": row.id, "deduped": result.deduped},
            )
        return len(rows)
