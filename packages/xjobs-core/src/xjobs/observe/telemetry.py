"""`Telemetry`: the app's `Observer`, fanning each event out to the metrics, the spans and the liveness beats it has.

Disabled until something is turned on (`enable_metrics`, `enable_tracing`, `enable_health`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from xjobs.clock import Clock
from xjobs.contract.driver import ClaimedJob, NewJob, Outcome
from xjobs.contract.observer import Sending
from xjobs.errors import OptionInvalidError
from xjobs.observe.health import DEFAULT_GRACE_S, Liveness
from xjobs.observe.metrics import JobMetrics, Metrics
from xjobs.observe.snapshot import REFRESH_EVERY_S, ReadView
from xjobs.observe.tracing import OpenSpan, Tracing

BackendGauges = Literal["leader", "always", "never"]


class _Sent:
    """A send's count (`metrics` is `None` for a stage) and span, told what the store answered."""

    __slots__ = ("_job", "_metrics", "_queue", "_span")

    def __init__(self, metrics: Metrics | None, queue: str, job: str, span: Sending | None) -> None:
        self._metrics = metrics
        self._queue = queue
        self._job = job
        self._span = span

    def sent(self, job_ids: Sequence[str], fresh: int) -> None:
        """Count the new jobs, tell the span the ids."""
        if self._metrics is not None:
            self._metrics.enqueued(self._queue, self._job, fresh)
        if self._span is not None:
            self._span.sent(job_ids, fresh)


class _TracedSend:
    """A send's span around the send, then its count."""

    __slots__ = ("_job", "_metrics", "_queue", "_span")

    def __init__(self, span: Any, metrics: Metrics | None, queue: str, job: str) -> None:
        self._span = span
        self._metrics = metrics
        self._queue = queue
        self._job = job

    def __enter__(self) -> Sending:
        return _Sent(self._metrics, self._queue, self._job, self._span.__enter__())

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        self._span.__exit__(kind, error, tb)


class _Running:
    """One run observed: the running gauge and lateness at the start, the span around it, the
    duration at the end (a class, not a generator: this runs once per job)."""

    __slots__ = ("_bound", "_job", "_span", "_started", "_telemetry")

    def __init__(self, telemetry: Telemetry, job: ClaimedJob) -> None:
        self._telemetry = telemetry
        self._job = job
        self._started = 0.0
        self._span: OpenSpan | None = None
        self._bound: JobMetrics | None = None

    def __enter__(self) -> None:
        telemetry, job = self._telemetry, self._job
        self._started = time.perf_counter()
        metrics = telemetry.metrics
        if metrics is not None:
            bound = self._bound = metrics.job(job.queue, job.name)
            bound.running.inc()
            lateness = telemetry.lateness_s(job)
            if lateness is not None:
                bound.lateness.observe(max(lateness, 0.0))
        if telemetry.tracing is not None:
            self._span = telemetry.tracing.start_run(job)

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if self._span is not None:
            self._span.close(error)
        bound = self._bound
        if bound is not None:
            bound.running.dec()
            bound.duration.observe(time.perf_counter() - self._started)


class Telemetry:
    """The `Observer` an `App` hands to its facade and roles."""

    def __init__(self, clock: Clock, read_view: ReadView | None = None) -> None:
        self._clock = clock
        self._read_view = read_view
        self.metrics: Metrics | None = None
        self.tracing: Tracing | None = None
        self.liveness: Liveness | None = None
        self._gauges: BackendGauges = "leader"
        self._refresh_s = REFRESH_EVERY_S
        self.enabled = False

    # -- turning it on ------------------------------------------------------------------------

    def enable_metrics(
        self,
        *,
        registry: Any = None,
        backend_gauges: BackendGauges = "leader",
        refresh_s: float = REFRESH_EVERY_S,
    ) -> Metrics:
        """Count into a Prometheus registry (a new one by default). The backend-wide gauges are read
        by the scheduler leader (`"leader"`), by this process (`"always"`), or not at all."""
        if backend_gauges not in ("leader", "always", "never"):
            raise OptionInvalidError(
                f"backend_gauges is leader, always or never; got {backend_gauges!r}"
            )
        if self.metrics is None:
            self.metrics = Metrics(registry)
        self._gauges = backend_gauges
        self._refresh_s = refresh_s
        self.enabled = True
        return self.metrics

    def enable_tracing(self, tracer_provider: Any = None) -> Tracing:
        """Open spans through `tracer_provider` (default: OpenTelemetry's global provider)."""
        if self.tracing is None:
            self.tracing = Tracing(tracer_provider)
        self.enabled = True
        return self.tracing

    def enable_health(self, grace_s: float = DEFAULT_GRACE_S) -> Liveness:
        """Track each role loop's beats for `/healthz`."""
        if self.liveness is None:
            self.liveness = Liveness(grace_s)
        self.liveness.grace_s = grace_s
        self.enabled = True
        return self.liveness

    def disable(self) -> None:
        """Turn everything off again (the metrics, spans and beats are dropped)."""
        if self.metrics is not None:
            self.metrics.snapshot.stop()
        self.enabled = False
        self.metrics = None
        self.tracing = None
        self.liveness = None

    def metrics_app(self, *, wsgi: bool = False) -> Any:
        """An ASGI (or WSGI) app serving the metrics; turns them on if they are not yet."""
        metrics = self.metrics or self.enable_metrics()
        return metrics.wsgi_app() if wsgi else metrics.asgi_app()

    async def aclose(self) -> None:
        """Stop reading the backend-wide gauges."""
        if self.metrics is not None:
            await self.metrics.snapshot.aclose()

    # -- the Observer ------------------------------------------------------------------------

    def sending(
        self, queue: str, job: str, count: int, *, operation: str = "send"
    ) -> AbstractContextManager[Sending]:
        """Count what lands; open the PRODUCER span whose context the rows stamp."""
        counted = self.metrics if operation != "create" else None
        if self.tracing is None:
            return nullcontext(_Sent(counted, queue, job, None))
        return _TracedSend(self.tracing.sending(queue, job, count, operation), counted, queue, job)

    def enqueued(self, queue: str, job: str, count: int) -> None:
        """Count new jobs."""
        if self.metrics is not None:
            self.metrics.enqueued(queue, job, count)

    def running(self, job: ClaimedJob) -> AbstractContextManager[None]:
        """One run: the running gauge, its duration, its lateness and its CONSUMER span."""
        return _Running(self, job)

    def lateness_s(self, job: ClaimedJob) -> float | None:
        """How late the run starts after its job was due (`None`: the driver did not say)."""
        due_ms = job.due_at_ms
        if due_ms is None:
            return None
        return (self._clock.now_ms() - due_ms) / 1000

    def settled(self, job: ClaimedJob, outcome: Outcome, error: str | None) -> None:
        """Count the outcome; put it on the run's span."""
        if self.metrics is not None:
            self.metrics.settled(job.queue, job.name, outcome)
        if self.tracing is not None:
            self.tracing.settled(outcome, error)

    def lease_lost(self, job: ClaimedJob) -> None:
        """Count a missed fence."""
        if self.metrics is not None:
            self.metrics.lease_lost(job.queue, job.name)
        if self.tracing is not None:
            self.tracing.settled("lease-lost", None)

    def buried(self, queue: str, job: str) -> None:
        """Count a burial."""
        if self.metrics is not None:
            self.metrics.buried(queue, job)

    def step(self, name: str) -> AbstractContextManager[None]:
        """A step's span."""
        if self.tracing is None:
            return nullcontext()
        span: AbstractContextManager[None] = self.tracing.step(name)
        return span

    def step_event(self, kind: str, name: str) -> None:
        """A step event on the run's span."""
        if self.tracing is not None:
            self.tracing.step_event(kind, name)

    def cron_fired(self, task: str) -> None:
        """Count a fire."""
        if self.metrics is not None:
            self.metrics.cron_fired(task)

    def fan_in(self, job: str, outcome: str) -> None:
        """Count a resolved fan-in."""
        if self.metrics is not None:
            self.metrics.fan_in(job, outcome)

    def relaying(self, rows: Sequence[NewJob]) -> AbstractContextManager[None]:
        """A relay pass's span."""
        if self.tracing is None:
            return nullcontext()
        span: AbstractContextManager[None] = self.tracing.relaying(rows)
        return span

    def published(self, queue: str, count: int) -> None:
        """Count published outbox rows."""
        if self.metrics is not None:
            self.metrics.published(queue, count)

    def leader(self, role: str, leading: bool) -> None:
        """The leader gauge; the leading scheduler reads the backend-wide gauges."""
        metrics = self.metrics
        if metrics is None:
            return
        metrics.leader(role, leading)
        if self._gauges != "leader" or self._read_view is None:
            return
        if leading:
            metrics.snapshot.serve(self._read_view, self._refresh_s)
        else:
            metrics.snapshot.stop()

    def loop_beat(self, role: str, next_within_s: float) -> None:
        """A loop's beat; with `backend_gauges="always"`, the first one starts the gauges' reads."""
        if self.liveness is not None:
            self.liveness.beat(role, next_within_s)
        metrics = self.metrics
        if metrics is not None and self._gauges == "always" and self._read_view is not None:
            metrics.snapshot.serve(self._read_view, self._refresh_s)

    def draining(self, role: str, within_s: float) -> None:
        """A draining role: not ready, and alive until its drain's deadline (plus the grace)."""
        if self.liveness is not None:
            self.liveness.drain(role, within_s)
