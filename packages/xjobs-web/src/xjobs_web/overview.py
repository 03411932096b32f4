"""The overview's data: each queue's counts and pause, the job-name pauses, and the last hour of
counters as per-minute bars and per-name throughput and failure rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xjobs import Operator
from xjobs.contract.introspection import HOUR_MS, MINUTE_MS, Pause, QueueCounts, bucket_of
from xjobs.operate.counter_sums import window
from xjobs.operate.outcomes import FAILED, grouped
from xjobs_web.chart import MinuteBar, throughput_svg

MINUTES = 60
# Shown where the chart is when the operator is scoped to a tenant (a constant: no input in it).
SCOPED_CHART = (
    '<p class="empty" data-testid="counters-withheld">throughput counters sum every tenant\'s '
    "runs: a tenant-scoped view does not show them</p>"
)


@dataclass(frozen=True, slots=True)
class Overview:
    """What the overview page shows."""

    now_ms: int
    queues: list[QueueCounts]
    job_pauses: list[Pause]
    chart_svg: str
    rows: list[dict[str, Any]]
    total: dict[str, Any]


def minute_bars(buckets: list[Any], now_ms: int, minutes: int = MINUTES) -> list[MinuteBar]:
    """One bar per minute of the last `minutes` (the current one last), from minute buckets."""
    start = bucket_of(now_ms) - (minutes - 1) * MINUTE_MS
    completed = [0] * minutes
    failed = [0] * minutes
    for b in buckets:
        slot = (b.bucket_ms - start) // MINUTE_MS
        if not 0 <= slot < minutes:
            continue
        if b.outcome == "completed":
            completed[slot] += b.count
        elif b.outcome in FAILED:
            failed[slot] += b.count
    return [MinuteBar(start + i * MINUTE_MS, completed[i], failed[i]) for i in range(minutes)]


async def overview(op: Operator, now_ms: int) -> Overview:
    """Read the overview: queue counts (bounded scans), pauses, and the minute counters of the hour
    (not for a tenant-scoped operator: a counter sums every tenant's runs)."""
    queues = await op.queues()
    job_pauses = [p for p in await op.pauses() if p.kind == "job"]
    if op.tenant is not None:
        return Overview(now_ms, queues, job_pauses, SCOPED_CHART, [], {})
    since = bucket_of(now_ms) - (MINUTES - 1) * MINUTE_MS
    buckets = await op.counters("minute", since)
    win = await window(op.counters, now_ms, HOUR_MS)
    rows, total = grouped(win, None)
    return Overview(
        now_ms=now_ms,
        queues=queues,
        job_pauses=job_pauses,
        chart_svg=throughput_svg(minute_bars(buckets, now_ms)),
        rows=rows,
        total=dict(total),
    )
