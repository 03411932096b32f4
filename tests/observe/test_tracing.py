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
from opentelemetry.trace import SpanContext, SpanKind, StatusCode
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job
from xjobs.memory.outbox import MemoryOutboxStore


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
    app = xjobs.App(backend="memory://", tasks=[hourly], clock=clock)
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
