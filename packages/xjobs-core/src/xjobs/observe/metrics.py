"""The Prometheus metrics (`prometheus_client`, the `xjobs-core[prometheus]` extra, imported here only).

Labels stay low in cardinality: `queue`, `job`, `outcome`, `task`, `role` — never a job id or a tenant.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Final

from xjobs.errors import CapabilityMissingError
from xjobs.observe.snapshot import BackendSnapshot

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

DURATION_BUCKETS_S: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3600,
)
LATENESS_BUCKETS_S: Final = (
    0.005,
    0.01,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3600,
)

# The settle room's outcome as the `outcome` label spells it (a dead-lettered job is `dead`).
OUTCOME_LABELS: Final = {"dead-lettered": "dead"}

# Every metric name as exposed (counters with their `_total`), for the docs and the dashboards' test.
METRIC_NAMES: Final = (
    "xjobs_jobs_enqueued_total",
    "xjobs_jobs_settled_total",
    "xjobs_leases_lost_total",
    "xjobs_jobs_buried_total",
    "xjobs_cron_fired_total",
    "xjobs_fan_ins_total",
    "xjobs_outbox_published_total",
    "xjobs_job_duration_seconds",
    "xjobs_job_lateness_seconds",
    "xjobs_jobs_running",
    "xjobs_queue_ready",
    "xjobs_queue_oldest_ready_seconds",
    "xjobs_queue_dead",
    "xjobs_queue_dead_jobs",
    "xjobs_workers_alive",
    "xjobs_leader",
)
# A name kept beside the current one for one release (the seed's `queue_dead_jobs`): same samples.
METRIC_ALIASES: Final = {"xjobs_queue_dead_jobs": "xjobs_queue_dead"}


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise CapabilityMissingError(
            "Prometheus metrics need prometheus_client: pip install 'xjobs-core[prometheus]'"
        ) from exc
    return prometheus_client


class _BackendCollector:
    """The backend-wide gauges, read from the last snapshot (never a query per scrape)."""

    def __init__(self, snapshot: BackendSnapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Any:
        """One family per gauge; empty while this process serves no snapshot."""
        from prometheus_client.core import GaugeMetricFamily

        view = self._snapshot.current()
        ready = GaugeMetricFamily(
            "xjobs_queue_ready", "Jobs due now per queue (bounded count).", labels=["queue"]
        )
        oldest = GaugeMetricFamily(
            "xjobs_queue_oldest_ready_seconds",
            "How long the oldest due job of a queue has waited.",
            labels=["queue"],
        )
        dead = GaugeMetricFamily(
            "xjobs_queue_dead", "Dead jobs per queue (bounded count).", labels=["queue"]
        )
        dead_alias = GaugeMetricFamily(
            "xjobs_queue_dead_jobs",
            "Deprecated alias of xjobs_queue_dead (removed in the next release).",
            labels=["queue"],
        )
        alive = GaugeMetricFamily("xjobs_workers_alive", "Live worker processes in the registry.")
        if view is not None:
            for queue in view.queues:
                ready.add_metric([queue.queue], queue.ready)
                oldest.add_metric([queue.queue], queue.oldest_ready_s)
                dead.add_metric([queue.queue], queue.dead)
                dead_alias.add_metric([queue.queue], queue.dead)
            if view.workers_alive is not None:
                alive.add_metric([], view.workers_alive)
        yield from (ready, oldest, dead, dead_alias, alive)


class _Family:
    """One labelled metric and its children by label values, cached: `labels()` takes a lock and
    builds a key on every call, and this runs several times per job."""

    __slots__ = ("_children", "_lock", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}
        self._lock = threading.Lock()

    def child(self, *labels: str) -> Any:
        """The child of these label values."""
        child = self._children.get(labels)
        if child is None:
            with self._lock:
                child = self._children.setdefault(labels, self._metric.labels(*labels))
        return child


class _Histogram:
    """One labelled histogram's counts, kept by the run path itself (no lock: the event loop is its
    only writer; a scrape from another thread reads a copy, as consistent as the client's own)."""

    __slots__ = ("_bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Count `value` in the first bucket whose bound is at least it."""
        self.counts[bisect_left(self._bounds, value)] += 1
        self.total += value

    def sample(self) -> tuple[list[tuple[str, float]], float]:
        """The cumulative buckets, `+Inf` last, and the sum."""
        counts, total = list(self.counts), self.total
        cumulative, seen = [], 0
        for bound, count in zip((*map(_float_label, self._bounds), "+Inf"), counts, strict=True):
            seen += count
            cumulative.append((bound, float(seen)))
        return cumulative, total


def _float_label(bound: float) -> str:
    """A bucket bound as prometheus_client writes it (`1.0`, `0.005`)."""
    return repr(float(bound))


class JobMetrics:
    """One (queue, job)'s run counts: a run's start, end and settle add to plain fields, read at
    scrape time by the run collector (a prometheus_client child takes a lock per update, some
    7 µs a run in all; this runs for every job)."""

    __slots__ = ("duration", "lateness", "running", "settled_by")

    def __init__(self, running: _Running) -> None:
        self.running = running
        self.lateness = _Histogram(LATENESS_BUCKETS_S)
        self.duration = _Histogram(DURATION_BUCKETS_S)
        self.settled_by: dict[str, int] = {}

    def settled(self, outcome: str) -> None:
        """One run ended with `outcome`."""
        label = OUTCOME_LABELS.get(outcome, outcome)
        self.settled_by[label] = self.settled_by.get(label, 0) + 1


class _Running:
    """The runs of one queue in this process (a gauge)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def inc(self) -> None:
        """One more run."""
        self.value += 1

    def dec(self) -> None:
        """One run fewer."""
        self.value -= 1


class _RunCollector:
    """`xjobs_jobs_running`, `xjobs_jobs_settled_total`, `xjobs_job_duration_seconds` and
    `xjobs_job_lateness_seconds`, from the run path's own counts."""

    def __init__(
        self, jobs: dict[tuple[str, str], JobMetrics], running: dict[str, _Running]
    ) -> None:
        self._jobs = jobs
        self._running = running

    def collect(self) -> Any:
        """One family per metric, a sample per label set seen."""
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        running = GaugeMetricFamily(
            "xjobs_jobs_running", "Jobs running in this process.", labels=["queue"]
        )
        settled = CounterMetricFamily(
            "xjobs_jobs_settled",
            "Runs ended by the settle room, by outcome.",
            labels=["queue", "job", "outcome"],
        )
        duration = HistogramMetricFamily(
            "xjobs_job_duration_seconds",
            "How long a run took, claim to settle.",
            labels=["queue", "job"],
        )
        lateness = HistogramMetricFamily(
            "xjobs_job_lateness_seconds",
            "How late a run started after its job was due.",
            labels=["queue", "job"],
        )
        for queue, gauge in list(self._running.items()):
            running.add_metric([queue], gauge.value)
        for (queue, job), bound in list(self._jobs.items()):
            for outcome, count in list(bound.settled_by.items()):
                settled.add_metric([queue, job, outcome], count)
            for family, histogram in ((duration, bound.duration), (lateness, bound.lateness)):
                buckets, total = histogram.sample()
                family.add_metric([queue, job], buckets, total)
        yield from (running, settled, duration, lateness)


class Metrics:
    """This process's xjobs metrics in their own `CollectorRegistry` (the default one is untouched)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        client = _client()
        self.registry: CollectorRegistry = registry or client.CollectorRegistry(auto_describe=True)
        self.snapshot = BackendSnapshot()
        reg = self.registry
        self._enqueued_metric = client.Counter(
            "xjobs_jobs_enqueued",
            "Jobs enqueued (deduped ones not counted).",
            ["queue", "job"],
            registry=reg,
        )
        self._lost_metric = client.Counter(
            "xjobs_leases_lost",
            "Settles that missed their fence (the claim moved on).",
            ["queue", "job"],
            registry=reg,
        )
        self._buried_metric = client.Counter(
            "xjobs_jobs_buried",
            "Lapsed leases buried by a claim on their final attempt.",
            ["queue", "job"],
            registry=reg,
        )
        self._fired_metric = client.Counter(
            "xjobs_cron_fired", "Task occurrences fired.", ["task"], registry=reg
        )
        self._fan_in_metric = client.Counter(
            "xjobs_fan_ins",
            "Fan-ins (step.invoke, step.map) a parent resolved, by outcome.",
            ["job", "outcome"],
            registry=reg,
        )
        self._published_metric = client.Counter(
            "xjobs_outbox_published",
            "Staged jobs the relay published (deduped ones not counted).",
            ["queue"],
            registry=reg,
        )
        self._leader_metric = client.Gauge(
            "xjobs_leader", "1 while this process leads as `role`.", ["role"], registry=reg
        )
        self._enqueued: _Family = _Family(self._enqueued_metric)
        self._lost: _Family = _Family(self._lost_metric)
        self._buried: _Family = _Family(self._buried_metric)
        self._fired: _Family = _Family(self._fired_metric)
        self._published: _Family = _Family(self._published_metric)
        self._fan_ins: _Family = _Family(self._fan_in_metric)
        self._leader: _Family = _Family(self._leader_metric)
        self._jobs: dict[tuple[str, str], JobMetrics] = {}
        self._running: dict[str, _Running] = {}
        reg.register(_RunCollector(self._jobs, self._running))
        reg.register(_BackendCollector(self.snapshot))

    def job(self, queue: str, job: str) -> JobMetrics:
        """The children of `job` in `queue`, bound on first use."""
        key = (queue, job)
        bound = self._jobs.get(key)
        if bound is None:
            running = self._running.setdefault(queue, _Running())
            bound = self._jobs.setdefault(key, JobMetrics(running))
        return bound

    def enqueued(self, queue: str, job: str, count: int) -> None:
        """`count` new jobs in `queue`."""
        if count:
            self._enqueued.child(queue, job).inc(count)

    def settled(self, queue: str, job: str, outcome: str) -> None:
        """One run ended with `outcome`."""
        self.job(queue, job).settled(outcome)

    def lease_lost(self, queue: str, job: str) -> None:
        """One settle missed its fence."""
        self._lost.child(queue, job).inc()

    def buried(self, queue: str, job: str) -> None:
        """One lapsed lease buried."""
        self._buried.child(queue, job).inc()

    def cron_fired(self, task: str) -> None:
        """One occurrence fired."""
        self._fired.child(task).inc()

    def fan_in(self, job: str, outcome: str) -> None:
        """One fan-in of `job` resolved with `outcome` (`completed` or `failed`)."""
        self._fan_ins.child(job, outcome).inc()

    def published(self, queue: str, count: int) -> None:
        """`count` staged jobs published."""
        if count:
            self._published.child(queue).inc(count)

    def started(self, queue: str, job: str, lateness_s: float | None) -> None:
        """A run started: one more running, and its lateness when the due time is known."""
        bound = self.job(queue, job)
        bound.running.inc()
        if lateness_s is not None:
            bound.lateness.observe(max(lateness_s, 0.0))

    def ended(self, queue: str, job: str, duration_s: float) -> None:
        """A run ended after `duration_s`."""
        bound = self.job(queue, job)
        bound.running.dec()
        bound.duration.observe(duration_s)

    def leader(self, role: str, leading: bool) -> None:
        """1 while this process leads as `role`, else 0."""
        self._leader.child(role).set(1 if leading else 0)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition of every metric and its content type."""
        client = _client()
        return client.generate_latest(self.registry), client.CONTENT_TYPE_LATEST

    def asgi_app(self) -> Any:
        """An ASGI app serving this registry (mount it at `/metrics`)."""
        return _client().make_asgi_app(registry=self.registry)

    def wsgi_app(self) -> Any:
        """A WSGI app serving this registry."""
        return _client().make_wsgi_app(registry=self.registry)
