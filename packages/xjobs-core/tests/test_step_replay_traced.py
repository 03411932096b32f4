"""Step replays are traced alike: a `sleep` or `wait_for_event` answered from its record is a
`step.replay` event on the run's span, as a replayed `run` is (issue 43)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job
from xjobs.clock import ManualClock


class Order(BaseModel):
    order_id: str


def charge(order_id: str) -> str:
    return f"charged {order_id}"


@job(tenant="none", idempotency_key=lambda i: i.order_id, queue="orders")
async def fulfil(ctx: JobContext, input: Order) -> None:
    await ctx.step.run("charge", charge, input.order_id)
    await ctx.step.sleep("cool-off", timedelta(minutes=5))
    await ctx.step.wait_for_event("paid", "order.paid", match={"order": input.order_id})
    await ctx.step.sleep("ship", timedelta(minutes=1))


def _traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _step_events(span: ReadableSpan) -> list[tuple[str, object]]:
    return [(e.name, dict(e.attributes or {}).get("xjobs.step")) for e in span.events]


@pytest.mark.asyncio
async def test_a_replayed_sleep_and_a_replayed_wait_are_traced_like_a_replayed_run() -> None:
    provider, exporter = _traced()
    clock = ManualClock()
    backend = await xjobs.connect("memory://", clock=clock)
    app = xjobs.App(backend, jobs=[fulfil], clock=clock, retention=None)
    app.telemetry.enable_tracing(provider)
    async with app:
        enqueued = await fulfil.enqueue(Order(order_id="o-1"))
        await app.run_worker(until_idle=True)  # runs charge, then parks on the sleep
        clock.advance(5 * 60_000)
        await app.run_worker(until_idle=True)  # replays charge and the sleep, parks on the wait
        await app.send_event("order.paid", {"order": "o-1"})
        await app.run_worker(until_idle=True)  # the wait sees its event, parks on the second sleep
        clock.advance(60_000)
        await app.run_worker(until_idle=True)  # replays all four, completes
        assert (await app.get_job(enqueued.job_id)).state == "completed"
    runs = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "process orders"),
        key=lambda s: s.start_time or 0,
    )
    assert [_step_events(r) for r in runs] == [
        [("step.sleep", "cool-off")],
        [("step.replay", "charge"), ("step.replay", "cool-off"), ("step.wait", "paid")],
        [("step.replay", "charge"), ("step.replay", "cool-off"), ("step.sleep", "ship")],
        [
            ("step.replay", "charge"),
            ("step.replay", "cool-off"),
            ("step.replay", "paid"),
            ("step.replay", "ship"),
        ],
    ]
