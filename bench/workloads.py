"""The workloads W1–W11 and WOP of performance.md, each driving one `Contender` and answering its
figures."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bench.contender import Contender, Read, Unsupported
from bench.cost import Window, meter
from bench.probe import probe

BULK = 500
PRELOAD_CONCURRENCY = 50  # a library without bulk enqueue is preloaded by this many calls at once
DRAIN_TIMEOUT_S = 900.0
LATENCY_JOBS = 200
LATENCY_GAP_S = 0.010
LATENCY_SETTLE_S = 1.0  # let the idle worker reach its idle state before the first enqueue
W10_TIMEOUT_S = 30.0  # W10: the longest one round trip may wait for its result
W6_WINDOW_S = 20.0  # W6 is a rate: the jobs run within this window when a claim is slow
W6_DRAINS = 3  # W6 fills once and drains this many times; the median drain is its figure
# WOP: the operator's own rows (in the bench queue, older than the fill), the page size, and how
# deep the cursor of the deep page sits among them; each read is timed `op_calls` times on each
# table in alternation (fewer when the pairs of calls pass OP_WINDOW_S), after OP_WARM untimed
# pairs (fewer when they pass OP_WARM_S)
OP_LIVE = 900
OP_DEAD = 100
OP_PAGE = 50
OP_DEEP = 500
OP_WINDOW_S = 10.0
OP_WARM = 5
OP_WARM_S = 2.0
OP_READS = ("first", "dead", "deep", "queues")
W11_CHILDREN = 10_000
FAN_OUT_CONCURRENCY = 100  # W11: the worker's concurrency while the children run

Figures = dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """One child's work: which workloads, and their sizes."""

    workloads: tuple[str, ...]
    n: int
    fill: int
    w7_jobs: int
    w8_runs: int
    op_calls: int
    w10_trips: int = LATENCY_JOBS
    w11_children: int = W11_CHILDREN


def _items(n: int, start: int = 0) -> list[tuple[int, float]]:
    now = time.time()
    return [(i, now) for i in range(start, start + n)]


async def preload(c: Contender, n: int, start: int = 0) -> None:
    """Put `n` jobs in, untimed: in bulk calls where the library has them, else calls at once."""
    items = _items(n, start)
    try:
        for k in range(0, n, BULK):
            await c.enqueue_bulk(items[k : k + BULK])
    except Unsupported:
        for k in range(0, n, PRELOAD_CONCURRENCY):
            chunk = items[k : k + PRELOAD_CONCURRENCY]
            await asyncio.gather(*(c.enqueue(i, sent_at) for i, sent_at in chunk))


async def _timed(body: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await body()
    return time.perf_counter() - started


def rate(jobs: int, window: Window) -> Figures:
    """Jobs per second over the window, and what each 1,000 of them cost."""
    return {"jobs_per_s": jobs / window.seconds, **window.per_1k(jobs)}


async def w1(c: Contender, plan: Plan) -> Figures:
    await c.reset()
    async with meter.window() as window:
        for i in range(plan.n):
            await c.enqueue(i, time.time())
    return rate(plan.n, window)


async def w2(c: Contender, plan: Plan) -> Figures:
    await c.reset()
    items = _items(plan.n)
    async with meter.window() as window:
        for k in range(0, plan.n, BULK):
            await c.enqueue_bulk(items[k : k + BULK])
    return rate(plan.n, window)


async def drain(
    c: Contender, n: int, concurrency: int, window_s: float = DRAIN_TIMEOUT_S
) -> tuple[int, Window]:
    """Jobs run, and the measured window from the worker's start until `n` have run and storage
    shows none unfinished — or until `window_s` has passed, whichever is first. A peer whose
    worker is a process of its own has it started, idle, before the window (`standby`)."""
    probe.reset(n)
    async with c.standby(concurrency), meter.window() as window, c.worker(concurrency):
        try:
            await asyncio.wait_for(probe.done.wait(), window_s)
            while await c.unfinished():  # noqa: ASYNC110 - storage is polled, it has no event
                await asyncio.sleep(0.005)
        except TimeoutError:
            if window_s == DRAIN_TIMEOUT_S:
                raise
        await window.stop()
    return probe.count, window


async def w3(c: Contender, plan: Plan, concurrency: int) -> Figures:
    await c.reset()
    await preload(c, plan.n)
    ran, window = await drain(c, plan.n, concurrency)
    return rate(ran, window)


class _DroppedSpans:
    """A span exporter that keeps nothing: the spans are made and batched as in production."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


# W3c10obs's sampler: the share of traces a service running thousands of jobs a second records
# (parent-based: a run follows its enqueue's decision, stamped in its traceparent)
TRACE_RATIO = 0.1


async def w3_observed(
    c: Contender, plan: Plan, concurrency: int, ratio: float | None = TRACE_RATIO
) -> Figures:
    """W3 with xjobs's Prometheus metrics and OpenTelemetry spans (SDK, batched, dropped) on:
    `ratio` of the traces recorded (parent-based; 0: none, what xjobs's own spans and metrics
    cost beside the SDK's making of unrecorded spans), or every one (`None`)."""
    import xjobs

    await c.reset()  # first: a reset may open a new app (memory)
    app = getattr(c, "app", None)
    if not isinstance(app, xjobs.App):
        raise Unsupported("no xjobs telemetry to turn on")
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
    except ImportError as exc:
        raise Unsupported("opentelemetry-sdk is not installed") from exc
    sampler = ALWAYS_ON if ratio is None else ParentBased(TraceIdRatioBased(ratio))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_DroppedSpans()))  # type: ignore[arg-type]
    try:
        app.telemetry.enable_metrics(backend_gauges="never")
        app.telemetry.enable_tracing(provider)
    except xjobs.XJobsError as exc:
        raise Unsupported(exc.message) from exc
    try:
        await _preload_in_requests(c, plan.n, provider.get_tracer("bench"))
        ran, window = await drain(c, plan.n, concurrency)
    finally:
        app.telemetry.disable()
        provider.shutdown()
    return rate(ran, window)


async def _preload_in_requests(c: Contender, n: int, tracer: Any) -> None:
    """Put `n` jobs in, untimed, each enqueued inside a trace of its own, as a service's requests
    enqueue them: the sampler decides per job, and each run reads its own traceparent."""

    async def one(i: int, sent_at: float) -> None:
        with tracer.start_as_current_span("request"):
            await c.enqueue(i, sent_at)

    items = _items(n)
    for k in range(0, n, PRELOAD_CONCURRENCY):
        await asyncio.gather(
            *(one(i, sent_at) for i, sent_at in items[k : k + PRELOAD_CONCURRENCY])
        )


# W3c10rate's limit: far above any rate the bench reaches, so every run takes a permit and none waits
RATE_LIMIT_PER_S = 1_000_000


async def w3_rated(c: Contender, plan: Plan, concurrency: int) -> Figures:
    """W3 with a fleet rate limit set far above the achieved rate: what taking a permit costs."""
    import xjobs

    await c.reset()
    if not isinstance(getattr(c, "app", None), xjobs.App):
        raise Unsupported("no xjobs rate limit to set")
    c.global_rate = xjobs.Rate(limit=RATE_LIMIT_PER_S, per=timedelta(seconds=1))  # type: ignore[attr-defined]
    try:
        await preload(c, plan.n)
        ran, window = await drain(c, plan.n, concurrency)
    finally:
        c.global_rate = None  # type: ignore[attr-defined]
    return rate(ran, window)


async def w3_processes(c: Contender, plan: Plan, processes: int, concurrency: int) -> Figures:
    """W3 drained by `processes` worker processes of `concurrency` each (`bench.fleet_worker`),
    as many hosts run them: the queue is paused while they start, and the window runs from its
    resume until storage shows none unfinished."""
    import xjobs

    await c.reset()
    app = getattr(c, "app", None)
    if not isinstance(app, xjobs.App) or c.engine == "memory":
        raise Unsupported("no worker processes sharing one backend")
    await app.operator.pause("queue", c.queue)
    await preload(c, plan.n)
    fleet = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.fleet_worker", str(getattr(c, "url", "")), str(concurrency),
            stdout=asyncio.subprocess.PIPE,
        )
        for _ in range(processes)
    ]  # fmt: skip
    try:
        for worker in fleet:
            assert worker.stdout is not None
            line = await asyncio.wait_for(worker.stdout.readline(), DRAIN_TIMEOUT_S)
            if line.strip() != b"ready":
                raise RuntimeError(f"a bench worker process did not start: {line!r}")
        async with meter.window() as window:
            await app.operator.resume("queue", c.queue)
            async with asyncio.timeout(DRAIN_TIMEOUT_S):
                while await c.unfinished():  # noqa: ASYNC110 - storage is polled, it has no event
                    await asyncio.sleep(0.005)
            await window.stop()
    finally:
        for worker in fleet:
            if worker.returncode is None:
                worker.terminate()
        for worker in fleet:
            await worker.wait()
    return {**rate(plan.n, window), "processes": processes}


async def w4_pooled(c: Contender, plan: Plan) -> Figures:
    """W4 with the contender's app reaching Postgres through a pgbouncer in transaction mode."""
    through = getattr(c, "through_pooler", None)
    if through is None:
        raise Unsupported("no pooler to cross")
    async with through():
        return await w4(c, plan)


async def w4(c: Contender, plan: Plan) -> Figures:
    await c.reset()
    probe.reset(LATENCY_JOBS)
    async with c.worker(10):
        await asyncio.sleep(LATENCY_SETTLE_S)
        async with meter.window() as window:
            for i in range(LATENCY_JOBS):
                await c.enqueue(i, time.time())
                await asyncio.sleep(LATENCY_GAP_S)
            await asyncio.wait_for(probe.done.wait(), 60)
    latencies = sorted(probe.latencies_ms)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": cuts[98],
        **window.per_1k(LATENCY_JOBS),
    }


async def w10(c: Contender, plan: Plan) -> Figures:
    """Enqueue→result latency: `plan.w10_trips` round trips, one at a time, LATENCY_GAP_S apart,
    each enqueueing a job whose body returns its number and awaiting that value through the
    library's result API, to a worker left idle for LATENCY_SETTLE_S first: p50 and p99 ms."""
    if not c.results:
        raise Unsupported("no job results")
    await c.reset()
    probe.reset(plan.w10_trips)
    samples: list[float] = []
    async with c.worker(10):
        await asyncio.sleep(LATENCY_SETTLE_S)
        async with meter.window() as window:
            for i in range(plan.w10_trips):
                started = time.perf_counter()
                answer = await c.round_trip(i, time.time(), W10_TIMEOUT_S)
                samples.append((time.perf_counter() - started) * 1000.0)
                if answer != i:
                    raise AssertionError(f"round trip {i} answered {answer!r}, not {i}")
                await asyncio.sleep(LATENCY_GAP_S)
    p50, p99 = percentiles(sorted(samples))
    return {"p50_ms": p50, "p99_ms": p99, "trips": len(samples), **window.per_1k(len(samples))}


async def w6(c: Contender, plan: Plan, quiesce: Callable[[], Awaitable[None]]) -> Figures:
    """W3 at concurrency 10 on a table holding `plan.fill` other rows, as a rate over at most
    `W6_WINDOW_S` (a claim that scans the filled rows would take many minutes); the claim's plan.
    A library with a retention purge runs one pass over the fill first, as production would
    (its completed half goes; `purged` says how many), and the table is vacuumed after it. The
    table is filled once and drained `W6_DRAINS` times, each drain of `plan.n` fresh jobs: the
    median drain is the figure, as W3's is the median of its repetitions."""
    await c.reset()
    fill_s = await _timed(lambda: c.fill(plan.fill))
    try:
        purged: int | None = await c.purge_finished(keep_none=True)
    except Unsupported:
        purged = None
    await quiesce()
    plan_text = ""
    drains: list[Figures] = []
    for k in range(W6_DRAINS):
        await preload(c, plan.n, start=k * plan.n)
        if k == 0:
            plan_text = await c.explain_claim()
        ran, window = await drain(c, plan.n, 10, W6_WINDOW_S)
        drains.append({**rate(ran, window), "ran": ran})
    middle = sorted(drains, key=lambda d: d["jobs_per_s"])[len(drains) // 2]
    figures = {
        **middle,
        "per_drain": [d["jobs_per_s"] for d in drains],
        "fill_s": fill_s,
        "explain": plan_text,
    }
    return figures if purged is None else {**figures, "purged": purged}


async def w9(c: Contender, plan: Plan, quiesce: Callable[[], Awaitable[None]]) -> Figures:
    """W3 at concurrency 10 while a retention pass purges `plan.fill` finished rows: the drain's
    rate (against W3c10), and the purge's rows and seconds (it starts with the drain and is awaited
    after it)."""
    await c.reset()
    fill_s = await _timed(lambda: c.fill_finished(plan.fill))
    await quiesce()
    await preload(c, plan.n)
    started = time.perf_counter()
    purge = asyncio.create_task(c.purge_finished())
    try:
        ran, window = await drain(c, plan.n, 10)
    finally:
        purged = await purge
    purge_s = time.perf_counter() - started
    return {
        **rate(ran, window),
        "purged": purged,
        "purge_s": purge_s,
        "purge_rows_per_s": purged / purge_s,
        "drain_s": window.seconds,
        "fill_s": fill_s,
    }


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    """p50 and p99 of `samples_ms` (with fewer than two samples, both are the one sample)."""
    if len(samples_ms) < 2:
        return samples_ms[0], samples_ms[0]
    cuts = statistics.quantiles(samples_ms, n=100, method="inclusive")
    return statistics.median(samples_ms), cuts[98]


async def _alternate(pair: tuple[Read, Read], calls: int) -> tuple[list[list[float]], list[Any]]:
    """Milliseconds of up to `calls` timed calls of each read of `pair`, in alternation (A B B A
    …), fewer when they pass OP_WINDOW_S, after up to OP_WARM untimed calls of each (fewer when
    they pass OP_WARM_S); and what each read last answered."""
    seen: list[Any] = [None, None]
    warm_ends = time.perf_counter() + OP_WARM_S
    for _ in range(OP_WARM):
        seen = [await read() for read in pair]
        if time.perf_counter() > warm_ends:
            break
    samples: list[list[float]] = [[], []]
    window_ends = time.perf_counter() + OP_WINDOW_S
    while len(samples[0]) < calls and (not samples[0] or time.perf_counter() < window_ends):
        for k in (0, 1) if len(samples[0]) % 2 == 0 else (1, 0):
            started = time.perf_counter()
            seen[k] = await pair[k]()
            samples[k].append((time.perf_counter() - started) * 1000.0)
    return samples, seen


def _odd_pages(seen: dict[str, list[Any]], before: dict[str, Any]) -> list[str]:
    """What makes the two stores' reads not comparable: a short page, or a page of the operator's
    own rows (dead, deep) that the fill changed."""
    odd = []
    for name in ("first", "dead", "deep"):
        for table, page in zip(("empty", "filled"), seen[name], strict=True):
            if len(page) != OP_PAGE:
                odd.append(f"the {name} page on the {table} table holds {len(page)} jobs")
    for name in ("dead", "deep"):
        if seen[name][1] != before[name]:
            odd.append(f"the {name} page beside the fill is not the page before it")
    return odd


async def wop(c: Contender, plan: Plan, quiesce: Callable[[], Awaitable[None]]) -> Figures:
    """The operator's reads on a table of its own rows alone ("empty") and on one holding them
    beside `plan.fill` other rows (W6's fill), in alternation: p50 and p99 ms of each read, and
    the list statement's plans on the filled table."""
    await c.reset()
    await c.seed_operator(OP_LIVE, OP_DEAD)
    reads = await c.operator_reads(OP_PAGE, OP_DEEP)
    before = {name: await reads[name][1]() for name in ("dead", "deep")}
    figures: Figures = {"fill": plan.fill, "fill_s": await _timed(lambda: c.fill(plan.fill))}
    await quiesce()
    seen: dict[str, list[Any]] = {}
    for name in OP_READS:
        samples, seen[name] = await _alternate(reads[name], plan.op_calls)
        for table, ms in zip(("empty", "filled"), samples, strict=True):
            p50, p99 = percentiles(ms)
            figures[f"{name}_{table}_p50_ms"] = p50
            figures[f"{name}_{table}_p99_ms"] = p99
            figures[f"{name}_{table}_calls"] = len(ms)
    figures["counts_empty"], figures["counts_filled"] = ("; ".join(q) for q in seen["queues"])
    odd = _odd_pages(seen, before)
    if odd:
        figures["odd"] = "; ".join(odd)
    try:
        plans = await c.explain_operator()
    except Unsupported:
        plans = {}
    figures |= {f"explain_{name}": text for name, text in plans.items()}
    return figures


async def w7(c: Contender, plan: Plan, used_memory: Callable[[], Awaitable[int]]) -> Figures:
    """Bytes of Redis memory per stored job, and keys per job, for `plan.w7_jobs` jobs."""
    await c.reset()
    before = await used_memory()
    await preload(c, plan.w7_jobs)
    after = await used_memory()
    return {"bytes_per_job": (after - before) / plan.w7_jobs}


async def w11(c: Contender, plan: Plan) -> Figures:
    """Fan-out: one parent maps `plan.w11_children` no-op children and a continuation runs when
    every child has: seconds from the parent's start to the continuation's."""
    await c.reset()
    async with (
        c.standby(FAN_OUT_CONCURRENCY),
        c.worker(FAN_OUT_CONCURRENCY),
        meter.window() as window,
    ):
        await c.fan_out(plan.w11_children, DRAIN_TIMEOUT_S)
    return {"seconds": window.seconds, **window.per_1k(plan.w11_children)}


async def w8(c: Contender, plan: Plan) -> Figures:
    steps = getattr(c, "steps", None)
    if steps is None:
        raise Unsupported("no durable steps")
    figures: Figures = await steps(plan.w8_runs)
    return figures
