"""OpenTelemetry spans (`opentelemetry-api`, the `xjobs-core[otel]` extra, imported here only; the SDK is the user's).

A PRODUCER `send {queue}` span around each enqueue, stage and cron fire, whose context is the
stamped `traceparent`; a CONSUMER `process {queue}` span per run, parented by and LINKED to that
context; a child span per `step.run`; events for sleeps, waits and replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from xjobs.actor import set_traceparent
from xjobs.contract.driver import ClaimedJob, NewJob, Outcome
from xjobs.errors import CapabilityMissingError

SYSTEM: Final = "xjobs"
# Outcomes that end a run with an error the span records.
FAILED_OUTCOMES: Final = frozenset(
    {"retried", "dead-lettered", "dropped", "refused", "interrupted"}
)
MAX_LINKS: Final = 128


def _api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise CapabilityMissingError(
            "OpenTelemetry tracing needs opentelemetry-api: pip install 'xjobs-core[otel]'"
        ) from exc
    return trace


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

        from xjobs import __version__

        self.api = trace
        self.context = context
        self.kinds = trace.SpanKind
        self.tracer = trace.get_tracer("xjobs", __version__, tracer_provider=tracer_provider)
        # The last traceparent read and what it parsed to: the jobs of one batch share it.
        self._last: tuple[str | None, Any, Any, tuple[Any, ...]] = (None, None, None, ())

    def error_status(self, description: str) -> Any:
        """An error status with `description`."""
        return self.api.Status(self.api.StatusCode.ERROR, description)

    def _parent(self, traceparent: str | None) -> tuple[Any, Any]:
        """The context a stamped traceparent names and its span context (`None`s when invalid)."""
        if not traceparent:
            return None, None
        parts = traceparent.split("-")
        if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
            return None, None
        try:
            trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
        except ValueError:
            return None, None
        if not trace_id or not span_id:
            return None, None
        trace = self.api
        span_context = trace.SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags & 0xFF)
        )
        return trace.set_span_in_context(trace.NonRecordingSpan(span_context)), span_context

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

    def _origin(self, traceparent: str | None) -> tuple[Any, tuple[Any, ...]]:
        """The parent context of a run and its links, from its stamped traceparent (the last one
        parsed is kept: the jobs of one enqueue_many, one stage, one relay pass share it)."""
        last = self._last
        if traceparent == last[0] and traceparent is not None:
            return last[1], last[3]
        parent, span_context = self._parent(traceparent)
        links = (self.api.Link(span_context),) if span_context is not None else ()
        self._last = (traceparent, parent, span_context, links)
        return parent, links

    def start_run(self, job: ClaimedJob) -> OpenSpan:
        """The CONSUMER span of one run, made current: a child of the enqueue's context, linked to it."""
        parent, links = self._origin(job.traceparent)
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
        return OpenSpan(span, self)

    def settled(self, outcome: Outcome, error: str | None) -> None:
        """The run's span gets its outcome; a failure's error is recorded on it."""
        span = self.api.get_current_span()
        if not span.is_recording():
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
            _, span_context = self._parent(row.traceparent)
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
