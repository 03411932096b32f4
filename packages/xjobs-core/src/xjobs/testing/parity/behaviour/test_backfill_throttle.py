"""Parity: a backfill's `rate` throttle is spent inside the batch's step, so a replayed batch
waits for nothing, and its wait ends when the run is cancelled (semantics.md, "Factories")."""

from __future__ import annotations

import time
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest

from xjobs.factories.backfill import backfill
from xjobs.factories.backfill_pass import Page
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import NOW_RETRY, QUEUE, within

pytestmark = [
    pytest.mark.xjobs_parity,
    pytest.mark.requires("backfills"),
    pytest.mark.requires("steps"),
]

ROWS = list(range(1, 8))  # seven rows, two a batch: batches 0 to 3


class TimedSource:
    """Rows after a cursor; notes when each fetch happened; `fail_on` raises once on that row."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on
        self.fetched: list[tuple[Any, float]] = []
        self.failed_at: float | None = None

    async def fetch(self, cursor: Any, limit: int, tenant: str | None) -> Page[int]:
        self.fetched.append((cursor, time.monotonic()))
        after = 0 if cursor is None else int(cursor)
        items = [r for r in ROWS if r > after][:limit]
        return Page(items, items[-1] if len(items) == limit else None)

    async def handle(self, items: list[int], tenant: str | None) -> None:
        if self.fail_on is not None and self.fail_on in items:
            self.fail_on = None
            self.failed_at = time.monotonic()
            raise RuntimeError("the handler failed once")


async def test_a_replayed_batch_spends_no_throttle(parity: ParityEnv) -> None:
    """Rule: the throttle is spent inside the batch's step. At one batch a second, the retry
    replays batches 0 and 1 from their steps and reruns batch 2 at once: had the replayed
    batches waited, batch 2's fetch would come two intervals (2 s) after the failure."""
    source = TimedSource(fail_on=5)
    sweep = backfill(
        "fill_paced",
        fetch=source.fetch,
        handle=source.handle,
        ledger=lambda: app.backend.backfills,
        batch=2,
        rate=1.0,
        queue=QUEUE,
        retry=NOW_RETRY,
    )
    async with parity.app([sweep]) as app:
        run = await app.enqueue(sweep, {})
        await app.run_worker(until_idle=True)
        record = await app.get_job(run.job_id)
        assert (record.state, record.attempt) == ("completed", 2), record.last_error
        assert [cursor for cursor, _ in source.fetched] == [None, 2, 4, 4, 6]
        assert source.failed_at is not None
        rerun_at = source.fetched[3][1]
        assert rerun_at - source.failed_at < 1.0
        # The first attempt was paced: each batch a second after the one before.
        first = [at for _, at in source.fetched[:3]]
        assert min(b - a for a, b in pairwise(first)) >= 0.9


async def test_a_deadline_ends_the_throttle_s_wait(parity: ParityEnv) -> None:
    """Rule: the throttle's wait is cancellable: a run whose deadline passes while it waits out a
    100 s interval ends at the deadline. Each of the three attempts replays what ran and runs one
    new batch (a fresh run's first batch waits for nothing), then is cut in its wait."""
    source = TimedSource()
    sweep = backfill(
        "fill_slow",
        fetch=source.fetch,
        handle=source.handle,
        ledger=lambda: app.backend.backfills,
        batch=2,
        rate=0.01,
        queue=QUEUE,
        retry=NOW_RETRY,
        timeout=timedelta(milliseconds=300),
    )
    async with parity.app([sweep]) as app:
        run = await app.enqueue(sweep, {})
        started = time.monotonic()
        await within(app.run_worker(until_idle=True), what="the cut waits", timeout_s=30.0)
        elapsed = time.monotonic() - started
        record = await app.get_job(run.job_id)
        assert (record.state, record.attempt) == ("dead", 3)
        assert "timeout" in (record.last_error or "")
        assert [cursor for cursor, _ in source.fetched] == [None, 2, 4]
        assert elapsed < 10.0
