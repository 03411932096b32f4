"""OpenTelemetry (the SDK's in-memory exporter): one trace from the web request that enqueued, through
the PRODUCER `send` span, to each CONSUMER `process` run (parented by and linked to it) and its steps."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    SpanContext,
    SpanKind,
    StatusCode,
    get_current_span,
)
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job
from xjobs.memory.outbox import MemoryOutboxStore
from xjobs.observe.tracing import Tracing, _span_ids_if_parent_based


class Order(BaseModel):
    order_id: str


def charge(order_id: str) -> str:
    return f"charged {order_id}"


def ship(order_id: str) -> str:
    return f"shipped {order_id}"


@job(tenant="none", idempotency_key=lambda i: i.order_id, queue="orders")
async def fulfil(ctx: JobContext, input: Order) -> None:
    await ctx.step.run("charge", charge, input.order_id)
    await ctx.step.sleep("cool-off", timedelta(milliseconds=20))
    await ctx.step.run("ship", ship, input.order_id)


def refuse_card(order_id: str) -> str:
    raise ValueError(f"card declined for {order_id}")


@job(tenant="none", idempotency_key=lambda i: i.order_id, queue="orders", retry=Retry(attempts=1))
async def declined(ctx: JobContext, input: Order) -> None:
    await ctx.step.run("charge", refuse_card, input.order_id)


def _traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def _ids(context: SpanContext | None) -> tuple[int, int]:
    assert context is not None
    return context.trace_id, context.span_id


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def _run_until_done(app: xjobs.App, job_id: str) -> None:
    for _ in range(200):
        await app.run_worker(until_idle=True)
        if (await app.get_job(job_id)).state == "completed":
            return
        await asyncio.sleep(0.02)
    pytest.fail("the workflow never completed")


@pytest.mark.asyncio
async def test_one_trace_spans_the_request_the_enqueue_each_run_and_its_steps() -> None:
    provider, exporter = _traced()
    app = xjobs.App(backend="memory://", jobs=[fulfil])
    app.telemetry.enable_tracing(provider)
    web = provider.get_tracer("the-web-service")
    async with app:
        with web.start_as_current_span("POST /orders", kind=SpanKind.SERVER):
            enqueued = await fulfil.enqueue(Order(order_id="o-1"))
        await _run_until_done(app, enqueued.job_id)
    spans = list(exporter.get_finished_spans())

    request = _one(spans, "POST /orders")
    send = _one(spans, "send orders")
    runs = sorted((s for s in spans if s.name == "process orders"), key=lambda s: s.start_time or 0)
    charged, shipped = _one(spans, "step charge"), _one(spans, "step ship")
    assert {s.context.trace_id for s in spans} == {request.context.trace_id}
    assert send.kind == SpanKind.PRODUCER
    assert _ids(send.parent) == _ids(request.context)
    assert _attributes(send) == {
        "messaging.system": "xjobs",
        "messaging.destination.name": "orders",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.message.id": enqueued.job_id,
        "xjobs.job": "fulfil",
        "xjobs.fresh": 1,
    }
    assert len(runs) == 2  # the sleep parked the first run; the second finished the job
    for run in runs:
        assert run.kind == SpanKind.CONSUMER
        assert _ids(run.parent) == _ids(send.context)
        assert [_ids(link.context) for link in run.links] == [_ids(send.context)]
        assert _attributes(run)["messaging.message.id"] == enqueued.job_id
        assert _attributes(run)["messaging.operation.type"] == "process"
        assert _attributes(run)["xjobs.job"] == "fulfil"
        assert _attributes(run)["xjobs.attempt"] == 1  # a suspension costs no attempt
    assert [_attributes(r)["xjobs.outcome"] for r in runs] == ["suspended", "completed"]
    assert _ids(charged.parent) == _ids(runs[0].context)
    assert _ids(shipped.parent) == _ids(runs[1].context)
    assert [e.name for e in runs[0].events] == ["step.sleep"]
    assert [(e.name, dict(e.attributes or {})) for e in runs[1].events] == [
        ("step.replay", {"xjobs.step": "charge"}),
        ("step.replay", {"xjobs.step": "cool-off"}),
    ]


@pytest.mark.asyncio
async def test_a_failed_run_records_its_exception_on_the_run_and_the_step() -> None:
    provider, exporter = _traced()
    app = xjobs.App(backend="memory://", jobs=[declined])
    app.telemetry.enable_tracing(provider)
    async with app:
        await declined.enqueue(Order(order_id="o-2"))
        await app.run_worker(until_idle=True)
    spans = list(exporter.get_finished_spans())

    run, step = _one(spans, "process orders"), _one(spans, "step charge")
    assert _attributes(run)["xjobs.outcome"] == "dead-lettered"
    assert run.status.status_code == StatusCode.ERROR
    (event,) = [e for e in run.events if e.name == "exception"]
    assert dict(event.attributes or {})["exception.type"] == "StepFailedError"
    assert step.status.status_code == StatusCode.ERROR
    assert [e.name for e in step.events] == ["exception"]
    assert dict(step.events[0].attributes or {})["exception.type"] == "ValueError"


@pytest.mark.asyncio
async def test_without_tracing_the_enqueue_stamps_no_traceparent_of_its_own() -> None:
    app = xjobs.App(backend="memory://", jobs=[declined])
    async with app:
        enqueued = await declined.enqueue(Order(order_id="o-3"))
        record = await app.get_job(enqueued.job_id)
    assert not app.telemetry.enabled
    assert record.traceparent is None


HOUR = 3_600_000
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z, an occurrence of "0 * * * *"


@job(tenant="none", idempotency_key=lambda i: i.order_id, queue="orders")
async def nightly(ctx: JobContext, input: Order) -> None:
    await ctx.step.run("tally", charge, input.order_id)


hourly = xjobs.task(
    job=nightly,
    cron="0 * * * *",
    tz="UTC",
    input=lambda at: Order(order_id=at.isoformat()),
    name="tally.hourly",
)


@pytest.mark.asyncio
async def test_a_cron_fire_is_a_send_span_its_run_continues() -> None:
    provider, exporter = _traced()
    clock = xjobs.ManualClock(START)
    app = xjobs.App(backend="memory://", tasks=[hourly], clock=clock, retention=None)
    app.telemetry.enable_tracing(provider)
    async with app:
        scheduler = app.scheduler()
        await scheduler.tick()
        clock.advance(HOUR)
        await scheduler.tick()
        await scheduler.close()
        (fire,) = (await app.task_fires()).values()
        record = await app.get_job(fire.job_id)
        await app.run_worker(until_idle=True)
    spans = list(exporter.get_finished_spans())

    send, run = _one(spans, "send orders"), _one(spans, "process orders")
    assert record.traceparent is not None
    assert record.traceparent.split("-")[2] == f"{send.context.span_id:016x}"
    assert _attributes(send)["messaging.message.id"] == fire.job_id
    assert _ids(run.parent) == _ids(send.context)
    assert [_ids(link.context) for link in run.links] == [_ids(send.context)]
    assert _ids(_one(spans, "step tally").parent) == _ids(run.context)


@pytest.mark.asyncio
async def test_a_staged_job_keeps_the_stage_span_through_the_relay() -> None:
    provider, exporter = _traced()
    app = xjobs.App(backend="memory://", jobs=[fulfil])
    app.telemetry.enable_tracing(provider)
    web = provider.get_tracer("the-web-service")
    async with app:
        outbox = app.outbox_backend.outbox
        assert isinstance(outbox, MemoryOutboxStore)
        with web.start_as_current_span("POST /orders"), outbox.transaction() as tx:
            staged = fulfil.stage(tx, Order(order_id="o-4"))
        await app.run_relay(until_idle=True)
        await _run_until_done(app, staged.job_id)
    spans = list(exporter.get_finished_spans())

    request, stage = _one(spans, "POST /orders"), _one(spans, "send orders")
    publish = _one(spans, "publish outbox")
    runs = [s for s in spans if s.name == "process orders"]
    assert _attributes(stage)["messaging.operation.type"] == "create"
    assert _ids(stage.parent) == _ids(request.context)
    assert _attributes(publish)["messaging.batch.message_count"] == 1
    assert [_ids(link.context) for link in publish.links] == [_ids(stage.context)]
    assert runs
    assert all(_ids(run.parent) == _ids(stage.context) for run in runs)
    assert {s.context.trace_id for s in spans if s is not publish} == {request.context.trace_id}


class _Delegating(Sampler):
    """A sampler of the user's own that decides as `inner` does: xjobs cannot read its rule, so it
    asks it for every run."""

    def __init__(self, inner: Sampler) -> None:
        self._inner = inner

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return self._inner.should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return f"Delegating{{{self._inner.get_description()}}}"


seen_in_run: list[SpanContext] = []
enqueued_in_run: list[str] = []


@job(tenant="none", idempotency_key=lambda i: i.order_id, queue="orders")
async def observed(ctx: JobContext, input: Order) -> None:
    seen_in_run.append(get_current_span().get_span_context())
    if not input.order_id.startswith("child-"):
        enqueued_in_run.append(
            (await observed.enqueue(Order(order_id=f"child-{input.order_id}"))).job_id
        )


async def _run_unsampled_enqueue(sampler: Sampler) -> tuple[list[ReadableSpan], str, str]:
    """A request of an unsampled trace enqueues `observed`; its run enqueues a child; both run.
    Answers the spans recorded and the two jobs' traceparents."""
    seen_in_run.clear()
    enqueued_in_run.clear()
    provider = TracerProvider(sampler=sampler)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = xjobs.App(backend="memory://", jobs=[observed])
    app.telemetry.enable_tracing(provider)
    web = provider.get_tracer("the-web-service")
    async with app:
        with web.start_as_current_span("POST /orders", kind=SpanKind.SERVER) as request:
            assert not request.get_span_context().trace_flags.sampled
            parent = await observed.enqueue(Order(order_id="o-9"))
        await app.run_worker(until_idle=True)
        first = (await app.get_job(parent.job_id)).traceparent
        child = (await app.get_job(enqueued_in_run[0])).traceparent
    assert first is not None
    assert child is not None
    return list(exporter.get_finished_spans()), first, child


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "sampler",
    [ParentBased(ALWAYS_OFF), _Delegating(ParentBased(ALWAYS_OFF))],
    ids=["sdk-parent-based", "a-sampler-of-its-own"],
)
async def test_a_run_of_an_unsampled_enqueue_records_nothing_and_carries_its_trace_on(
    sampler: Sampler,
) -> None:
    spans, first, child = await _run_unsampled_enqueue(sampler)

    assert spans == []
    trace_id, send_span_id, flags = first.split("-")[1:]
    assert not int(flags, 16) & 0x01  # not sampled (0x02: the SDK's trace id is random)
    run, child_run = seen_in_run
    for context in (run, child_run):
        assert f"{context.trace_id:032x}" == trace_id
        assert not context.trace_flags.sampled
        assert not context.is_remote
    assert f"{run.span_id:016x}" != send_span_id  # a span of its own, as the SDK makes one
    assert child.split("-")[1] == trace_id  # the job it enqueued continues the trace
    assert child.split("-")[3] == flags


@pytest.mark.asyncio
async def test_a_sampler_that_records_children_of_unsampled_parents_is_asked_for_each_run() -> None:
    spans, first, _ = await _run_unsampled_enqueue(
        ParentBased(ALWAYS_OFF, remote_parent_not_sampled=ALWAYS_ON)
    )

    runs = [s for s in spans if s.name == "process orders"]
    assert len(runs) == 2  # the first run and its child's, each recorded by the sampler's rule
    assert all(f"{s.context.trace_id:032x}" == first.split("-")[1] for s in runs)


@pytest.mark.parametrize(
    ("sampler", "follows"),
    [
        (None, True),  # the SDK's default: parent-based, always on at the root
        (ParentBased(TraceIdRatioBased(0.1)), True),
        (ParentBased(ALWAYS_ON, local_parent_not_sampled=ALWAYS_ON), True),
        (ParentBased(ALWAYS_ON, remote_parent_not_sampled=ALWAYS_ON), False),
        (ParentBased(ALWAYS_ON, remote_parent_not_sampled=TraceIdRatioBased(0.5)), False),
        (ALWAYS_ON, False),
        (TraceIdRatioBased(0.1), False),
        (_Delegating(ParentBased(ALWAYS_OFF)), False),
    ],
)
def test_runs_of_unsampled_enqueues_skip_the_sdk_only_where_its_sampler_would_drop_them(
    sampler: Sampler | None, follows: bool
) -> None:
    tracing = Tracing(TracerProvider(sampler=sampler))
    assert (_span_ids_if_parent_based(tracing.tracer) is not None) is follows


def test_a_tracer_of_no_sdk_is_always_asked() -> None:
    assert _span_ids_if_parent_based(NoOpTracerProvider().get_tracer("x")) is None
    assert _span_ids_if_parent_based(ProxyTracerProvider().get_tracer("x")) is None
