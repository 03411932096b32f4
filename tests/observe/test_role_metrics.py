"""The metrics of the roles in one process (memory backend): enqueues, cron fires, outbox publishes,
interrupted runs, the leader gauge and the backend-wide gauges the leading scheduler reads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, ManualClock, job, task
from xjobs.memory.outbox import MemoryOutboxStore

HOUR = 3_600_000
START = 1_767_225_600_000  # 2026-01-01T00:00:00Z, an occurrence of "0 * * * *"


class Item(BaseModel):
    key: str = "k"


@job(tenant="none", idempotency_key=lambda i: i.key, queue="reports")
async def report(ctx: JobContext, input: Item) -> None:
    """Fired by the task."""


hourly = task(
    job=report,
    cron="0 * * * *",
    tz="UTC",
    input=lambda at: Item(key=at.isoformat()),
    name="report.hourly",
)


@job(tenant="none", idempotency_key=lambda i: i.key, queue="slow")
async def slow(ctx: JobContext, input: Item) -> None:
    await asyncio.sleep(60)


def samples(app: xjobs.App) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    metrics = app.telemetry.metrics
    assert metrics is not None
    body, _ = metrics.exposition()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if not s.name.endswith("_created")
    }


def named(app: xjobs.App, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (sample, labels), value in samples(app).items() if sample == name}


@pytest.mark.asyncio
async def test_a_direct_enqueue_counts_new_jobs_not_deduped_ones() -> None:
    app = xjobs.App(backend="memory://", jobs=[report])
    app.telemetry.enable_metrics()
    async with app:
        await report.enqueue(Item(key="a"))
        await report.enqueue(Item(key="a"))
        await report.enqueue_many([Item(key="b"), Item(key="c")])
    assert named(app, "xjobs_jobs_enqueued_total") == {(("job", "report"), ("queue", "reports")): 3}


@pytest.mark.asyncio
async def test_the_leading_scheduler_counts_fires_and_serves_the_backend_gauges() -> None:
    clock = ManualClock(START)
    app = xjobs.App(backend="memory://", tasks=[hourly], clock=clock)
    metrics = app.telemetry.enable_metrics(refresh_s=0.01)
    async with app:
        scheduler = app.scheduler()
        await scheduler.tick()
        clock.advance(HOUR)
        await scheduler.tick()
        for _ in range(200):
            view = metrics.snapshot.current()
            if view is not None and view.queues:
                break
            await asyncio.sleep(0.01)
        leading = samples(app)
        await scheduler.close()
        after = samples(app)

    assert leading[("xjobs_cron_fired_total", (("task", "report.hourly"),))] == 1
    assert leading[("xjobs_jobs_enqueued_total", (("job", "report"), ("queue", "reports")))] == 1
    assert leading[("xjobs_leader", (("role", "scheduler"),))] == 1
    assert leading[("xjobs_queue_ready", (("queue", "reports"),))] == 1
    assert leading[("xjobs_queue_dead", (("queue", "reports"),))] == 0
    assert leading[("xjobs_queue_dead_jobs", (("queue", "reports"),))] == 0  # the alias
    assert leading[("xjobs_queue_oldest_ready_seconds", (("queue", "reports"),))] == 0
    assert leading[("xjobs_workers_alive", ())] == 0
    # a scheduler that stepped down serves no backend gauge: another process leads now
    assert after[("xjobs_leader", (("role", "scheduler"),))] == 0
    assert not [name for name, _ in after if name.startswith("xjobs_queue_")]


@pytest.mark.asyncio
async def test_a_process_that_does_not_lead_serves_no_backend_gauge() -> None:
    app = xjobs.App(backend="memory://", jobs=[report])
    app.telemetry.enable_metrics(refresh_s=0.01)
    async with app:
        await report.enqueue(Item())
        await app.run_worker(until_idle=True)
    assert named(app, "xjobs_queue_ready") == {}
    assert named(app, "xjobs_workers_alive") == {}


@pytest.mark.asyncio
async def test_the_relay_counts_what_it_published() -> None:
    app = xjobs.App(backend="memory://", jobs=[report])
    app.telemetry.enable_metrics()
    async with app:
        outbox = app.outbox_backend.outbox
        assert isinstance(outbox, MemoryOutboxStore)
        with outbox.transaction() as tx:
            report.stage(tx, Item(key="x"))
            report.stage(tx, Item(key="y"))
        staged_only = named(app, "xjobs_jobs_enqueued_total")
        await app.run_relay(until_idle=True)

    assert staged_only == {}  # a stage is not an enqueue until the relay publishes it
    assert named(app, "xjobs_outbox_published_total") == {(("queue", "reports"),): 2}
    assert named(app, "xjobs_jobs_enqueued_total") == {(("job", "report"), ("queue", "reports")): 2}


@pytest.mark.asyncio
async def test_an_interrupted_run_is_counted_and_leaves_nothing_running() -> None:
    app = xjobs.App(backend="memory://", jobs=[slow])
    app.telemetry.enable_metrics()
    async with app:
        await slow.enqueue(Item())
        worker = app.worker()
        await worker.start()
        for _ in range(500):
            if worker.running_jobs:
                break
            await asyncio.sleep(0.01)
        running = named(app, "xjobs_jobs_running")
        worker.interrupt()
        await worker.close()

    assert running == {(("queue", "slow"),): 1}
    assert named(app, "xjobs_jobs_running") == {(("queue", "slow"),): 0}
    settled = named(app, "xjobs_jobs_settled_total")
    assert settled == {(("job", "slow"), ("outcome", "interrupted"), ("queue", "slow")): 1}


@pytest.mark.asyncio
async def test_metrics_app_is_an_asgi_app_serving_the_exposition() -> None:
    app = xjobs.App(backend="memory://", jobs=[report])
    asgi = app.metrics_app()
    async with app:
        await report.enqueue(Item())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "headers": [],
        "query_string": b"",
    }
    await asgi(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    assert sent[0]["status"] == 200
    assert 'xjobs_jobs_enqueued_total{job="report",queue="reports"} 1.0' in body


def test_without_the_extras_installed_xjobs_runs_and_enabling_them_says_what_to_install() -> None:
    program = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["prometheus_client"] = None  # as if the extras were not installed
        sys.modules["opentelemetry"] = None
        from pydantic import BaseModel
        import xjobs

        class Item(BaseModel):
            key: str

        @xjobs.job(tenant="none", idempotency_key=lambda i: i.key)
        async def noop(ctx: xjobs.JobContext, input: Item) -> None:
            await ctx.step.run("one", lambda: 1)

        async def main() -> None:
            async with xjobs.App("memory://", jobs=[noop]) as app:
                await noop.enqueue(Item(key="k"))
                stats = await app.run_worker(until_idle=True)
                assert stats.completed == 1, stats
                assert not app.telemetry.enabled
                for turn_on in (app.telemetry.enable_metrics, app.telemetry.enable_tracing):
                    try:
                        turn_on()
                    except xjobs.XJobsError as exc:
                        print(exc.code, exc.message)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "XJOBS_CAPABILITY_MISSING Prometheus metrics need prometheus_client: pip install 'xjobs-core[prometheus]'",
        "XJOBS_CAPABILITY_MISSING OpenTelemetry tracing needs opentelemetry-api: pip install 'xjobs-core[otel]'",
    ]
