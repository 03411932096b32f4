"""Parity: a worker holds its runs by claim, so a job it reclaims beside a live earlier run is two
runs (semantics.md, "The worker": `max_in_flight`, the drain)."""

from __future__ import annotations

import asyncio

import pytest

from xjobs import JobContext, job
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    NOW_RETRY,
    QUEUE,
    Item,
    counting_app,
    eventually,
    key_of,
    org_of,
    within,
)

pytestmark = pytest.mark.xjobs_parity

LEASE_MS = int(LEASE.total_seconds() * 1000)
# How long a drain that forgot a live run takes to return: it joins nothing, so a few loop turns.
EARLY_STOP_S = 0.2
# The worker finds the lapsed lease on an idle pass: its backoff may be at its 2 s ceiling.
RECLAIM_WAIT_S = 5.0


class TestRunsByClaim:
    async def test_a_reclaim_beside_a_live_earlier_run_is_counted_and_drained_as_a_second_run(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a worker's runs are keyed by claim: when it reclaims a job whose earlier run lost
        its lease and ignores its cancellation, both runs count against `max_in_flight`, the end
        of the earlier one forgets only itself, and the drain waits for the later one."""
        first_cancelled = asyncio.Event()
        second_started = asyncio.Event()
        release_first, release_second = asyncio.Event(), asyncio.Event()
        ended: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            if ctx.attempt == 1:
                try:
                    await release_first.wait()
                except asyncio.CancelledError:
                    first_cancelled.set()
                    await release_first.wait()  # a body that ignores the cancellation
            else:
                second_started.set()
                await release_second.wait()
            ended.append(ctx.attempt)

        app, driver = counting_app(parity, [body])
        async with app:
            result = await body.enqueue(Item())
            driver.failing_heartbeats = 1_000  # the first run's lease is lost
            worker = app.worker(lease=LEASE, concurrency=2, max_in_flight=2)
            await worker.start()
            await within(first_cancelled.wait(), what="the first run to lose its lease")
            driver.failing_heartbeats = 0
            parity.clock.advance(LEASE_MS + 1)  # its lease lapses on the driver's clock
            await within(
                second_started.wait(),
                what="the same worker to reclaim the job",
                timeout_s=RECLAIM_WAIT_S,
            )
            while_both = worker.running_jobs
            release_first.set()
            await eventually(lambda: worker.stats.lease_lost == 1, what="the first run to end")
            after_first = worker.running_jobs
            stopping = asyncio.ensure_future(worker.stop())
            done, _ = await asyncio.wait({stopping}, timeout=EARLY_STOP_S)
            release_second.set()
            await within(stopping, what="the drain")
            record = await app.get_job(result.job_id)
        assert (while_both, after_first) == (2, 1)
        assert not done, "the drain returned while the reclaimed run was still running"
        assert ended == [1, 2]
        assert (record.state, record.attempt, record.claims) == ("completed", 2, 2)
