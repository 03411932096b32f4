"""OpenTelemetry spans (`opentelemetry-api`, the `xjobs-core[otel]` extra, imported here only; the SDK is the user's).

A PRODUCER `send {queue}` span around each enqueue, stage and cron fire, whose context is the
stamped `traceparent`; a CONSUMER `process {queue}` span per run, parented by and LINKED to that
context; a child span per `step.run`; events for sleeps, waits and replays. A run whose enqueue was
not sampled gets, without a call into the SDK, the non-recording span the SDK's default
parent-based sampler would give it (`_span_ids_if_parent_based`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final

from xjobs.actor import set_traceparent
from xjobs.contract.driver import ClaimedJob, NewJob, Outcome
from xjobs.errors import CapabilityMissingError
from xjobs.version import __version__

SYSTEM: Final = "xjobs"
# Outcomes that end a run with an error the span records.
FAILED_OUTCOMES: Final = frozenset(
    {"retried", "dead-lettered", "dropped", "refused", "interrupted"}
)
MAX_LINKS: Final = 128
SAMPLED: Final = 0x01  # the traceparent flag of a trace whose spans are recorded
# The recorded run span of this context, which its settle tells the outcome (unset for a run whose
# span records nothing: the settle then reads nothing else).
RUN_SPAN: ContextVar[Any] = ContextVar("xjobs_run_span", default=None)


def _api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise CapabilityMissingError(
            "OpenTelemetry tracing needs opentelemetry-api: pip install 'xjobs-core[otel]'"
        ) from exc
    return trace


def _span_ids_if_parent_based(tracer: Any) -> Any:
    """The span id generator of `tracer` when it is the OpenTelemetry SDK's and its sampler the
    SDK's parent-based one that drops every child of an unsampled remote parent (the default
    sampler, and every `parentbased_*` one): for such a parent the SDK makes a non-recording span
    of the parent's trace with a new span id, calling no processor, and xjobs makes it the same
    way at a third of the cost. `None` for any other tracer or sampler: the tracer is asked."""
    try:
        from opentelemetry.sdk.trace import Tracer as SdkTracer
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
    except ImportError:
        return None
    if type(tracer) is not SdkTracer:
        return None
    sampler = tracer.sampler
    if type(sampler).should_sample is not ParentBased.should_sample:
        return None
    if getattr(sampler, "_remote_parent_not_sampled", None) is not ALWAYS_OFF:
        return None
    return tracer.id_generator


def _ids(traceparent: str | None) -> tuple[int, int, int] | None:
    """A stamped traceparent's trace id, span id and flags (`None` when invalid or absent)."""
    if not traceparent:
        return None
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, flags & 0xFF


def _traceparent(context: Any) -> str:
    """A span context in the W3C `traceparent` form."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class _SpanSending:
    """A send span told what the store answered."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def sent(self, job_ids: Sequence[str], fresh: int) -> None:
        """One id: the message id; several: the batch's size."""
        if len(job_ids) == 1:
            self._span.set_attribute("messaging.message.id", job_ids[0])
        self._span.set_attribute("xjobs.fresh", fresh)


class OpenSpan:
    """A span made current until `close` (cheaper than the SDK's nested context managers: this
    runs once per job)."""

    __slots__ = ("_span", "_token", "_tracing")

    def __init__(self, span: Any, tracing: Tracing) -> None:
        self._span = span
        self._tracing = tracing
        self._token = tracing.context.attach(tracing.api.set_span_in_context(span))

    def close(self, error: BaseException | None) -> None:
        """Detach it, record `error` (an exception that escaped), end it."""
        self._tracing.context.detach(self._token)
        if error is not None and isinstance(error, Exception):
            self._span.record_exception(error)
            self._span.set_status(self._tracing.error_status(f"{type(error).__name__}: {error}"))
        self._span.end()


class _RecordedRun(OpenSpan):
    """A run's recorded span: current, and the one its settle tells the outcome."""

    __slots__ = ("_marked",)

    def __init__(self, span: Any, tracing: Tracing) -> None:
        super().__init__(span, tracing)
        self._marked = RUN_SPAN.set(span)

    def close(self, error: BaseException | None) -> None:
        """Unmark it, then close it."""
        RUN_SPAN.reset(self._marked)
        super().close(error)


class _SendSpan:
    """The PRODUCER span of one send, as a context manager: its context is the stamped traceparent."""

    __slots__ = ("_attributes", "_name", "_open", "_token", "_tracing")

    def __init__(self, tracing: Tracing, name: str, attributes: dict[str, Any]) -> None:
        self._tracing = tracing
        self._name = name
        self._attributes = attributes
        self._open: OpenSpan | None = None
        self._token: Any = None

    def __enter__(self) -> _SpanSending:
        tracing = self._tracing
        span = tracing.tracer.start_span(
            self._name, kind=tracing.kinds.PRODUCER, attributes=self._attributes
        )
        self._open = OpenSpan(span, tracing)
        span_context = span.get_span_context()
        if span_context.is_valid:
            self._token = set_traceparent(_traceparent(span_context))
        return _SpanSending(span)

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if self._token is not None:
            self._token.var.reset(self._token)
        assert self._open is not None
        self._open.close(error)


class Tracing:
    """xjobs's spans through a tracer of `tracer_provider` (default: the global one)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        trace = _api()
        from opentelemetry import context

        self.api = trace
        self.context = context
        self.kinds = trace.SpanKind
        self.tracer = trace.get_tracer("xjobs", __version__, tracer_provider=tracer_provider)
        self._span_ids = _span_ids_if_parent_based(self.tracer)
        self._random_trace_id = int(getattr(trace.TraceFlags, "RANDOM_TRACE_ID", 0))
        # The last traceparent read, its remote span context, and (once a span is started from
        # it) its parent context and links: the jobs of one batch share them.
        self._last: tuple[str | None, Any, Any, tuple[Any, ...]] = (None, None, None, ())

    def error_status(self, description: str) -> Any:
        """An error status with `description`."""
        return self.api.Status(self.api.StatusCode.ERROR, description)

    def _remote(self, traceparent: str | None) -> Any:
        """The span context a stamped traceparent names (`None` when invalid or absent)."""
        ids = _ids(traceparent)
        if ids is None:
            return None
        trace = self.api
        return trace.SpanContext(
            ids[0], ids[1], is_remote=True, trace_flags=trace.TraceFlags(ids[2])
        )

    def sending(self, queue: str, job: str, count: int, operation: str) -> _SendSpan:
        """A PRODUCER span; while it is open, jobs built stamp its context as their traceparent."""
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": queue,
            "messaging.operation.type": operation,
            "messaging.operation.name": operation,
            "xjobs.job": job,
        }
        if count != 1:
            attributes["messaging.batch.message_count"] = count
        return _SendSpan(self, f"send {queue}", attributes)

    def _last_remote(self, traceparent: str | None) -> Any:
        """`_remote`, kept for the last traceparent (the jobs of one enqueue_many, one stage, one
        relay pass share it)."""
        last = self._last
        if traceparent == last[0] and traceparent is not None:
            return last[1]
        remote = self._remote(traceparent)
        self._last = (traceparent, remote, None, ())
        return remote

    def _origin(self, remote: Any) -> tuple[Any, tuple[Any, ...]]:
        """The parent context of a run started from the last remote span context, and its links."""
        last = self._last
        if remote is None or last[2] is not None:
            return last[2], last[3]
        trace = self.api
        parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
        links = (trace.Link(remote),)
        self._last = (last[0], remote, parent, links)
        return parent, links

    def start_run(self, job: ClaimedJob) -> OpenSpan:
        """The CONSUMER span of one run, made current: a child of the enqueue's context, linked to it."""
        span_ids = self._span_ids
        if span_ids is not None:
            ids = _ids(job.traceparent)
            if ids is not None and not ids[2] & SAMPLED:
                trace = self.api
                unsampled = trace.SpanContext(
                    ids[0],
                    span_ids.generate_span_id(),
                    is_remote=False,
                    trace_flags=trace.TraceFlags(ids[2] & self._random_trace_id),
                )
                return OpenSpan(trace.NonRecordingSpan(unsampled), self)
        parent, links = self._origin(self._last_remote(job.traceparent))
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": job.queue,
            "messaging.message.id": job.id,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "xjobs.job": job.name,
            "xjobs.attempt": job.attempt,
        }
        span = self.tracer.start_span(
            f"process {job.queue}",
            context=parent,
            kind=self.kinds.CONSUMER,
            links=links,
            attributes=attributes,
        )
        return _RecordedRun(span, self) if span.is_recording() else OpenSpan(span, self)

    def settled(self, outcome: Outcome, error: str | None) -> None:
        """The run's span gets its outcome; a failure's error is recorded on it."""
        span = RUN_SPAN.get()
        if span is None:
            return
        span.set_attribute("xjobs.outcome", outcome)
        if outcome in FAILED_OUTCOMES and error:
            head = error.splitlines()[0]
            kind, _, message = head.partition(": ")
            span.add_event(
                "exception",
                {
                    "exception.type": kind,
                    "exception.message": message,
                    "exception.stacktrace": error,
                },
            )
            span.set_status(self.api.Status(self.api.StatusCode.ERROR, head))

    def step(self, name: str) -> Any:
        """A child span around one step's function (an error it raises is recorded)."""
        return self.tracer.start_as_current_span(f"step {name}", attributes={"xjobs.step": name})

    def step_event(self, kind: str, name: str) -> None:
        """An event on the run's span: `step.sleep`, `step.wait` or `step.replay`."""
        self.api.get_current_span().add_event(f"step.{kind}", {"xjobs.step": name})

    def relaying(self, rows: Sequence[NewJob]) -> Any:
        """A PRODUCER span around one relay pass, linked to each staged row's context."""
        links = []
        for row in rows[:MAX_LINKS]:
            span_context = self._remote(row.traceparent)
            if span_context is not None:
                links.append(self.api.Link(span_context))
        attributes = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "publish",
            "messaging.batch.message_count": len(rows),
        }
        return self.tracer.start_as_current_span(
            "publish outbox", kind=self.kinds.PRODUCER, links=links, attributes=attributes
        )
