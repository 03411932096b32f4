"""`App`: one backend, the registered jobs and tasks, and the calls a service, a test or the CLI makes."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Unpack

from xjobs.clock import Clock, SystemClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import BulkResult, EnqueueResult, JobRecord
from xjobs.contract.introspection import RequeueFilter
from xjobs.contract.plugins import DEFAULT_URL, connect
from xjobs.contract.retention import (
    DEFAULT_RETENTION,
    PURGE_STORES,
    Keep,
    PurgeCut,
    Retention,
    RetentionStore,
)
from xjobs.contract.stores import EventRecord, LeaderElection, SchedulerState, StepRecord, TaskFire
from xjobs.declare.describe import describe
from xjobs.declare.job import EnqueueOptions, JobHandle
from xjobs.declare.registry import Registry
from xjobs.declare.task import TaskHandle, task
from xjobs.enqueue.facade import JobsFacade
from xjobs.errors import (
    AppStateError,
    BackendClosedError,
    CapabilityMissingError,
    JobNotFoundError,
    JobNotRegisteredError,
    TaskNotRegisteredError,
)
from xjobs.event_match import (
    AMBIENT,
    AmbientTenant,
    encode_object,
    sending_tenant,
    validate_event_name,
)
from xjobs.factories.purge import PURGE_JOB, PurgeInput, purge, purge_pass
from xjobs.factories.purge_target import StoreTarget
from xjobs.observe.snapshot import read_view
from xjobs.observe.telemetry import Telemetry
from xjobs.operate.moves import moved
from xjobs.operate.operator import Operator
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES
from xjobs.roles.os_signals import on_shutdown_signals
from xjobs.roles.relay import Relay
from xjobs.roles.relay_options import RelayKwargs, resolve_relay_options
from xjobs.roles.relay_stats import RelayStats
from xjobs.roles.role import Role
from xjobs.roles.scheduler import Scheduler
from xjobs.roles.scheduler_options import SchedulerKwargs, resolve_scheduler_options
from xjobs.roles.scheduler_stats import SchedulerStats
from xjobs.roles.worker import Worker
from xjobs.roles.worker_options import WorkerKwargs, resolve_worker_options
from xjobs.roles.worker_stats import WorkerStats
from xjobs.run.settled import SettledHook

log = logging.getLogger("xjobs.app")

AppHook = Callable[["App"], Awaitable[None]]


class App:
    """A service's xjobs: `async with App(backend=url, jobs=[module]) as app:` opens it.

    `backend` defaults to `sqlite:///xjobs.db` in the working directory (xjobs-sqlite); the
    forgetful `memory://` only when asked for.

    `on_worker_start` / `on_worker_stop` run around `run_worker` in the worker's process (open a
    pool, warm a cache); `on_settled` is called after every ending settle that landed.
    `retention` is on by default (`DEFAULT_RETENTION`: finished jobs a day, failed and dead ones a
    week): its purge job runs on its cron on the scheduler's leader; `retention=None` keeps all.
    """

    def __init__(
        self,
        backend: str | Backend = DEFAULT_URL,
        *,
        jobs: Iterable[object] = (),
        tasks: Iterable[object] = (),
        clock: Clock | None = None,
        on_settled: SettledHook | None = None,
        on_worker_start: AppHook | None = None,
        on_worker_stop: AppHook | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        backend_options: Mapping[str, Any] | None = None,
        outbox: str | Backend | None = None,
        retention: Retention | None = DEFAULT_RETENTION,
    ) -> None:
        self.clock: Clock = clock or (
            backend.clock if isinstance(backend, Backend) else SystemClock()
        )
        # Retention on (the default): the purge job and its cron task are registered beside the
        # app's own; `retention=None` turns it off.
        self.retention = retention
        self._purge_task = None if retention is None else self._purge_task_for(retention)
        extra = () if self._purge_task is None else (self._purge_task,)
        self.registry = Registry(jobs, [*tasks, *extra])
        self._target = backend
        self._backend_options = dict(backend_options or {})
        self._backend: Backend | None = None
        self._owns_backend = not isinstance(backend, Backend)
        self._hooks: tuple[SettledHook, ...] = (on_settled,) if on_settled is not None else ()
        self._max_payload_bytes = max_payload_bytes
        self._facade: JobsFacade | None = None
        self._on_worker_start = on_worker_start
        self._on_worker_stop = on_worker_stop
        self._outbox_target = outbox
        self._outbox_backend: Backend | None = None
        # Off until turned on (`app.telemetry.enable_metrics()`, `metrics_app()`, the CLI's flags).
        self.telemetry = Telemetry(
            self.clock, read_view=lambda: read_view(self.operator, self.backend, self.clock)
        )

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> App:
        """Open the backend and bind every registered handle's `enqueue` to this app."""
        if self._backend is not None:
            raise AppStateError("this App is already open")
        if isinstance(self._target, Backend):
            backend = self._target
        else:
            backend = await connect(self._target, clock=self.clock, **self._backend_options)
        self._backend = backend
        outbox = backend
        if isinstance(self._outbox_target, Backend):
            outbox = self._outbox_target
        elif self._outbox_target is not None:
            try:
                outbox = await connect(self._outbox_target, clock=self.clock)
            except BaseException:
                self._backend = None
                if self._owns_backend:
                    await backend.close()
                raise
            outbox.require("outbox")
        self._outbox_backend = outbox
        if self.retention is not None:
            await self._keep_retention(backend)
        self._facade = JobsFacade(
            backend.jobs,
            self.clock,
            max_payload_bytes=self._max_payload_bytes,
            outbox=outbox.outbox,
            results=backend.results,
            observer=self.telemetry,
        )
        for handle in self.registry.jobs.values():
            handle.bind(self._facade)
        return self

    async def close(self) -> None:
        """Unbind the handles and close the backend this app opened."""
        backend, self._backend = self._backend, None
        if backend is None:
            return
        await self.telemetry.aclose()
        for handle in self.registry.jobs.values():
            if self._facade is not None and handle.bound_to(self._facade):
                handle.bind(None)
        self._facade = None
        outbox, self._outbox_backend = self._outbox_backend, None
        if outbox is not None and outbox is not backend and isinstance(self._outbox_target, str):
            await outbox.close()
        if self._owns_backend:
            await backend.close()

    async def __aenter__(self) -> App:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def backend(self) -> Backend:
        """The open backend this app enqueues into and runs against; refuses a closed app."""
        if self._backend is None:
            raise BackendClosedError("the App is not open; use `async with app:` first")
        return self._backend

    @property
    def jobs(self) -> dict[str, JobHandle[Any]]:
        """Every registered job handle by its durable name."""
        return self.registry.jobs

    def describe(self) -> dict[str, Any]:
        """Every registered job and task as JSON data, sorted by name."""
        return describe(self.registry.jobs, self.registry.tasks)

    # -- enqueue and read --------------------------------------------------------------------

    def _facade_for(self, handle: JobHandle[Any]) -> JobsFacade:
        if not self.registry.owns(handle):
            raise JobNotRegisteredError(f"job {handle.name!r} is not registered with this App")
        self.backend  # noqa: B018 - refuses a closed app
        assert self._facade is not None
        return self._facade

    async def enqueue(
        self,
        handle: JobHandle[Any],
        input: object,
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> EnqueueResult:
        """Enqueue one job of `handle` (the same path as `handle.enqueue`)."""
        options = EnqueueOptions(delay=delay, run_at=run_at, priority=priority)
        (result,) = await self._facade_for(handle).enqueue_inputs(handle, [input], options)
        return result

    async def enqueue_many(
        self,
        handle: JobHandle[Any],
        inputs: Sequence[object],
        *,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> list[EnqueueResult]:
        """Enqueue many jobs of `handle` in one round trip."""
        options = EnqueueOptions(delay=delay, run_at=run_at, priority=priority)
        return await self._facade_for(handle).enqueue_inputs(handle, list(inputs), options)

    async def get_job(self, job_id: str) -> JobRecord:
        """One job by id (`XJOBS_JOB_NOT_FOUND` when there is none)."""
        record = await self.backend.jobs.get(job_id)
        if record is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        return record

    async def cancel_job(self, job_id: str, reason: str | None = None) -> JobRecord:
        """Cancel a live job; its worker's next heartbeat misses and cancels the run."""
        return moved("cancel", job_id, await self.backend.jobs.cancel(job_id, reason))

    async def requeue_job(self, job_id: str) -> JobRecord:
        """Put a finished job back to `ready`, attempts reset."""
        return moved("requeue", job_id, await self.backend.jobs.requeue(job_id))

    async def requeue_jobs(self, where: RequeueFilter | None = None) -> BulkResult:
        """Requeue finished jobs in bulk (dead ones by default); one batch of `where.limit`."""
        where = where or RequeueFilter()
        return await self.operator.retry_where(where.as_job_filter(), limit=where.limit)

    @property
    def operator(self) -> Operator:
        """The operator surface: list, show and steer jobs, queues, pauses, tasks and workers."""
        return Operator(self.backend, self.registry, self.clock)

    def metrics_app(self, *, wsgi: bool = False) -> Any:
        """This app's Prometheus metrics as an ASGI app (`wsgi=True`: a WSGI app) to mount in the
        service's own server; turns the metrics on. Needs `xjobs-core[prometheus]`."""
        return self.telemetry.metrics_app(wsgi=wsgi)

    # -- retention -----------------------------------------------------------------------------

    async def _keep_retention(self, backend: Backend) -> None:
        """Hand the policy to the backend (Redis expires a finished job's keys by it); a backend
        without a retention store refuses the app, closed again if the app opened it."""
        try:
            try:
                backend.require("retention")
            except CapabilityMissingError as exc:
                raise CapabilityMissingError(
                    f"{exc}; retention is on by default: pass App(retention=None) to keep every "
                    "finished job"
                ) from exc
        except BaseException:
            self._backend = self._outbox_backend = None
            if self._owns_backend:
                await backend.close()
            raise
        assert backend.retention is not None
        assert self.retention is not None
        backend.retention.keep(Keep(self.retention, self._kept_per_job()))

    def _retention_store(self) -> RetentionStore:
        self.backend.require("retention")
        assert self.backend.retention is not None
        return self.backend.retention

    def _kept_per_job(self) -> dict[str, int]:
        return {n: h.retention_ms for n, h in self.jobs.items() if h.retention_ms is not None}

    def _targets(self, policy: Retention) -> list[StoreTarget]:
        def cut(now_ms: int) -> PurgeCut:
            return policy.cut(now_ms, self._kept_per_job())

        return [
            StoreTarget(s, self._retention_store, cut, policy.batch, policy.pause, policy.duty)
            for s in PURGE_STORES
        ]

    def _purge_task_for(self, policy: Retention) -> TaskHandle:
        handle = purge(self._targets(policy), clock=self.clock, queue=policy.queue)
        return task(
            job=handle, cron=policy.cron, tz="UTC", input=lambda _: PurgeInput(), name=PURGE_JOB
        )

    async def purge(
        self, policy: Retention | None = None, *, dry_run: bool = False
    ) -> dict[str, int]:
        """One purge pass here and now, at one clock reading (the cron task's job does the same,
        on the scheduler's leader): what went per store, or with `dry_run` what would go.
        `policy` defaults to the app's `retention=` (`XJOBS_APP_STATE` when there is none)."""
        policy = policy or self.retention
        if policy is None:
            raise AppStateError("retention is off: pass App(retention=Retention()) or a policy")
        return await purge_pass(self._targets(policy), self.clock.now_ms(), dry_run=dry_run)

    async def get_steps(self, job_id: str) -> list[StepRecord]:
        """The recorded steps of a job's run, by position (`XJOBS_JOB_NOT_FOUND` when there is none)."""
        self.backend.require("steps")
        record = await self.get_job(job_id)
        assert self.backend.steps is not None
        return await self.backend.steps.list(record.run_id, record.queue)

    # -- events --------------------------------------------------------------------------------

    async def send_event(
        self,
        event: str,
        payload: Mapping[str, Any] | None = None,
        *,
        tenant: str | AmbientTenant | None = AMBIENT,
    ) -> EventRecord:
        """Send `event` with a JSON-object `payload` in one tenant: it wakes every run of that tenant
        waiting for it whose match it satisfies, and is kept for waits that begin later only if
        they began before it was sent.

        `tenant` defaults to the ambient actor's org (inside a run, `ctx.tenant`); `None` is the
        untenanted scope (the waits of `tenant="none"` jobs). Naming another org than the actor's
        is `XJOBS_JOB_TENANT_MISMATCH`: only a process with no actor org sends across tenants."""
        self.backend.require("events")
        name = validate_event_name(event)
        text = encode_object(payload or {}, what=f"payload of event {name!r}")
        scope = sending_tenant(tenant)
        assert self.backend.events is not None
        return await self.backend.events.send(name, text, tenant=scope)

    # -- the roles ---------------------------------------------------------------------------

    async def _run_role(
        self, role: Role, kind: str, *, until_idle: bool, handle_signals: bool | None
    ) -> None:
        """Start `role`, wait for it, close it; the first SIGTERM/SIGINT drains it, a second one cuts it.

        Signals are handled by default only on the main thread of a run that is not `until_idle`.
        """
        if handle_signals is None:
            handle_signals = (
                not until_idle and threading.current_thread() is threading.main_thread()
            )

        def begin_drain() -> None:
            role.stop_accepting(drain_timeout_ms=role.options.drain_timeout_ms)
            if self.telemetry.enabled:  # /readyz answers `draining` from now on
                self.telemetry.draining(kind, role.options.drain_timeout_ms / 1000)

        drain = on_shutdown_signals(
            first=begin_drain,
            again=role.interrupt,
            log_event=f"jobs.{kind}.draining",
            role_id=role.id,
        )
        with drain if handle_signals else contextlib.nullcontext():
            await role.start(until_idle=until_idle)
            try:
                await role.wait()
            finally:
                await role.close()

    # -- the worker role ---------------------------------------------------------------------

    def worker(
        self, *, queues: Sequence[str] | None = None, **options: Unpack[WorkerKwargs]
    ) -> Worker:
        """A worker over `queues` (default: every queue a registered job uses), not yet started."""
        served = list(queues) if queues is not None else self.registry.queues()
        if not served:
            raise AppStateError("no queue to serve: register a job or pass queues=")
        return Worker(
            backend=self.backend,
            registry=self.registry,
            options=resolve_worker_options(queues=served, **options),
            clock=self.clock,
            hooks=self._hooks,
            observer=self.telemetry,
        )

    async def run_worker(
        self,
        *,
        queues: Sequence[str] | None = None,
        until_idle: bool = False,
        handle_signals: bool | None = None,
        **options: Unpack[WorkerKwargs],
    ) -> WorkerStats:
        """Run a worker in this process until it is idle (`until_idle=True`), stopped, or SIGTERM drains it.

        `options` are `concurrency` (per queue), `max_in_flight`, `lease`, `heartbeat`,
        `poll_floor`, `drain_timeout` and `drain_margin` (see `resolve_worker_options`).
        """
        worker = self.worker(queues=queues, **options)
        if self._on_worker_start is not None:
            await self._on_worker_start(self)
        try:
            await self._run_role(
                worker, "worker", until_idle=until_idle, handle_signals=handle_signals
            )
        finally:
            if self._on_worker_stop is not None:
                await self._on_worker_stop(self)
        return worker.stats

    # -- the scheduler role ------------------------------------------------------------------

    def _task(self, name: str) -> str:
        if name not in self.registry.tasks:
            raise TaskNotRegisteredError(
                f"no task named {name!r} is registered; known: {', '.join(self.registry.tasks) or 'none'}"
            )
        return name

    def _scheduler_state(self) -> SchedulerState:
        self.backend.require("scheduler")
        assert self.backend.scheduler is not None
        return self.backend.scheduler

    def scheduler(
        self, *, leader: LeaderElection | None = None, **options: Unpack[SchedulerKwargs]
    ) -> Scheduler:
        """A scheduler over every registered task, not yet started (`leader` defaults to the backend's)."""
        if not self.registry.tasks:
            raise AppStateError("no task to schedule: register one with App(tasks=[...])")
        self.backend  # noqa: B018 - refuses a closed app
        assert self._facade is not None
        return Scheduler(
            backend=self.backend,
            tasks=self.registry.tasks,
            facade=self._facade,
            options=resolve_scheduler_options(**options),
            clock=self.clock,
            leader=leader,
            observer=self.telemetry,
        )

    async def run_scheduler(
        self,
        *,
        leader: LeaderElection | None = None,
        handle_signals: bool | None = None,
        **options: Unpack[SchedulerKwargs],
    ) -> SchedulerStats:
        """Run a scheduler in this process until SIGTERM/SIGINT (or `stop()` from another task).

        SIGTERM lets the round in flight finish (up to `drain_timeout`), then releases
        leadership; a second signal abandons the round, and the lease lapses instead.
        """
        scheduler = self.scheduler(leader=leader, **options)
        await self._run_role(
            scheduler, "scheduler", until_idle=False, handle_signals=handle_signals
        )
        return scheduler.stats

    async def pause_task(self, name: str) -> bool:
        """Pause a task: it fires nothing and keeps its watermark; answers whether it was running."""
        return await self._scheduler_state().pause(self._task(name))

    async def resume_task(self, name: str) -> bool:
        """Resume a paused task: its catch-up policy decides what the paused time fires."""
        return await self._scheduler_state().resume(self._task(name))

    async def task_fires(self) -> dict[str, TaskFire]:
        """The last occurrence of each registered task that dispatched a job."""
        return await self._scheduler_state().task_fires(list(self.registry.tasks))

    # -- the relay role ------------------------------------------------------------------------

    @property
    def outbox_backend(self) -> Backend:
        """The backend whose outbox `stage()` writes to: `outbox=` if given, else the app's own."""
        self.backend  # noqa: B018 - refuses a closed app
        assert self._outbox_backend is not None
        return self._outbox_backend

    def relay(self, **options: Unpack[RelayKwargs]) -> Relay:
        """A relay from this app's outbox into its backend's queues, not yet started."""
        source = self.outbox_backend
        source.require("outbox")
        assert source.outbox is not None
        return Relay(
            outbox=source.outbox,
            jobs=self.backend.jobs,
            options=resolve_relay_options(**options),
            wake=source.wake,
            observer=self.telemetry,
        )

    async def run_relay(
        self,
        *,
        until_idle: bool = False,
        handle_signals: bool | None = None,
        **options: Unpack[RelayKwargs],
    ) -> RelayStats:
        """Relay staged jobs until idle (`until_idle=True`), stopped, or SIGTERM drains it."""
        relay = self.relay(**options)
        await self._run_role(relay, "relay", until_idle=until_idle, handle_signals=handle_signals)
        return relay.stats
