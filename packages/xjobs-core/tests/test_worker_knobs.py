"""Worker knobs fed NaN, infinities, negatives, zero where it means nothing, and values past their
bound are refused with `XJOBS_OPTION_INVALID`, naming the knob, before anything runs (issue 43)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, job
from xjobs.errors import OptionInvalidError
from xjobs.roles.worker_options import resolve_worker_options

NAN, INF = float("nan"), float("inf")
DAY = timedelta(days=1)
MS = timedelta(milliseconds=1)

REFUSED: list[tuple[str, Any]] = [
    *(("concurrency", v) for v in (NAN, INF, -INF, -1, 1.5, 10_001, 1e300, True, "3", None)),
    ("concurrency", {"knobs": NAN}),
    ("concurrency", {"knobs": -1}),
    ("concurrency", {"knobs": INF}),
    ("concurrency", {"elsewhere": 1}),
    *(("max_in_flight", v) for v in (NAN, INF, -1, 2.5, 10_001, True, "4")),
    *(
        ("lease", v)
        for v in (NAN, INF, -INF, -1, 0, 0.2, 1e300, timedelta(0), -DAY, DAY + MS, "30")
    ),
    ("lease", timedelta.max),
    *(("heartbeat", v) for v in (NAN, INF, -1, 0, timedelta(0), timedelta(seconds=11), 1e300)),
    *(("poll_floor", v) for v in (NAN, INF, -1, 0, 0.0001, timedelta(seconds=2) + MS, 1e300)),
    ("poll_floor", timedelta.max),
    *(("drain_timeout", v) for v in (NAN, INF, -1, -MS, DAY + MS, 1e300)),
    *(("drain_margin", v) for v in (NAN, INF, -1, DAY + MS, 1e300)),
    *(("threads", v) for v in (NAN, INF, 0, -1, 1.5, 10_001)),
]

# The edges that are meant: zero slots is a hard stop, a day's lease and drain, a 2 s floor.
ACCEPTED: list[tuple[str, Any]] = [
    ("concurrency", 0),
    ("concurrency", 10_000),
    ("max_in_flight", 0),
    ("lease", timedelta(milliseconds=300)),
    ("lease", DAY),
    ("heartbeat", timedelta(seconds=10)),
    ("poll_floor", MS),
    ("poll_floor", timedelta(seconds=2)),
    ("drain_timeout", timedelta(0)),
    ("drain_timeout", DAY),
    ("drain_margin", timedelta(0)),
    ("threads", 1),
]


class Nothing(BaseModel):
    pass


RAN: list[str] = []


@job(tenant="none", idempotency_key=lambda _: "one", queue="knobs")
async def body(ctx: JobContext, input: Nothing) -> None:
    RAN.append(ctx.job_id)


def _id(case: tuple[str, Any]) -> str:
    return f"{case[0]}={case[1]!r}"


@pytest.mark.parametrize("case", REFUSED, ids=[_id(c) for c in REFUSED])
@pytest.mark.asyncio
async def test_run_worker_refuses_the_knob_before_anything_runs(case: tuple[str, Any]) -> None:
    knob, value = case
    RAN.clear()
    started: list[str] = []

    async def on_start(app: xjobs.App) -> None:
        started.append("worker")

    async with xjobs.App(
        backend="memory://", jobs=[body], retention=None, on_worker_start=on_start
    ) as app:
        enqueued = await body.enqueue(Nothing())
        with pytest.raises(OptionInvalidError) as refused:
            await app.run_worker(until_idle=True, **{knob: value})
        record = await app.get_job(enqueued.job_id)
    assert refused.value.code == "XJOBS_OPTION_INVALID"
    assert knob in refused.value.message
    assert (started, RAN) == ([], [])
    assert (record.state, record.claims, record.attempt) == ("ready", 0, 0)


@pytest.mark.parametrize("case", REFUSED, ids=[_id(c) for c in REFUSED])
def test_the_worker_options_refuse_the_knob(case: tuple[str, Any]) -> None:
    knob, value = case
    with pytest.raises(OptionInvalidError, match=knob):
        resolve_worker_options(queues=["knobs"], **{knob: value})


@pytest.mark.parametrize("case", ACCEPTED, ids=[_id(c) for c in ACCEPTED])
def test_the_edges_of_each_knob_are_accepted(case: tuple[str, Any]) -> None:
    knob, value = case
    options = resolve_worker_options(queues=["knobs"], **{knob: value})
    assert options.queues == ("knobs",)


def test_a_margin_never_eats_more_than_half_the_drain() -> None:
    options = resolve_worker_options(
        queues=["knobs"], drain_timeout=timedelta(seconds=4), drain_margin=DAY
    )
    assert (options.drain_timeout_ms, options.drain_margin_ms) == (4_000, 2_000)
