"""Parity: a real `backfill()` through a worker — positional cursor steps, at-least-once batches, the ledger row (semantics.md, "Factories")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from xjobs.contract.backfills import BackfillLedger, BackfillStart, BackfillStatus
from xjobs.factories.backfill import backfill
from xjobs.factories.backfill_pass import Page
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import NOW_RETRY, QUEUE

pytestmark = [
    pytest.mark.xjobs_parity,
    pytest.mark.requires("backfills"),
    pytest.mark.requires("steps"),
]

ROWS = list(range(1, 8))  # seven rows, swept three at a time: batches of 3, 3 and 1


class CountingLedger:
    """The backend's ledger, counting the checkpoints that reach it."""

    def __init__(self, inner: BackfillLedger) -> None:
        self.inner = inner
        self.checkpoints: list[int] = []

    async def begin(self, start: BackfillStart) -> None:
        await self.inner.begin(start)

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        self.checkpoints.append(batches)
        return await self.inner.checkpoint(run_id, cursor, count, batches)

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        return await self.inner.finish(run_id, status, error)

    async def get(self, run_id: str) -> Any:
        return await self.inner.get(run_id)

    async def rows(self, name: str | None = None, limit: int = 1_000) -> Any:
        return await self.inner.rows(name, limit)

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> Any:
        return await self.inner.completed(name, checksum, environment, tenant)


class Source:
    """Rows after a cursor (the last id swept); `fail_on` raises once when that row is handled."""

    def __init__(self, fail_on: int | None = None, stalled: int = 0) -> None:
        self.handled: list[int] = []
        self.fail_on = fail_on
        self.stalled = stalled

    async def fetch(self, cursor: Any, limit: int, tenant: str | None) -> Page[int]:
        after = 0 if cursor is None else int(cursor)
        items = [r for r in ROWS if r > after][:limit]
        return Page(items, items[-1] if len(items) == limit else None)

    async def handle(self, items: list[int], tenant: str | None) -> None:
        if self.fail_on is not None and self.fail_on in items:
            self.fail_on = None
            raise RuntimeError("the handler failed once")
        self.handled.extend(items)

    async def count(self, tenant: str | None) -> int:
        return self.stalled


class TestASweep:
    async def test_a_worker_sweeps_in_positional_steps_that_hold_the_cursor_never_the_page(
        self, parity: ParityEnv
    ) -> None:
        """Rule: each batch is a step named by its position that persists the cursor and the
        count; the run's ledger row ends completed with the count and batches."""
        source = Source()
        ledger: list[CountingLedger] = []
        sweep = backfill(
            "fill_totals",
            fetch=source.fetch,
            handle=source.handle,
            count=source.count,
            ledger=lambda: ledger[0],
            batch=3,
            queue=QUEUE,
        )
        async with parity.app([sweep]) as app:
            assert app.backend.backfills is not None
            ledger.append(CountingLedger(app.backend.backfills))
            run = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
            assert record.state == "completed", record.last_error
            steps = await app.get_steps(run.job_id)
            assert [s.name for s in steps] == ["batch-0", "batch-1", "batch-2"]
            assert [json.loads(s.result or "null") for s in steps] == [
                {"cursor": 3, "count": 3, "done": False},
                {"cursor": 6, "count": 6, "done": False},
                {"cursor": None, "count": 7, "done": True},
            ]
            assert source.handled == ROWS
            row = await app.backend.backfills.get(record.run_id)
            assert row is not None
            assert (row.status, row.count, row.batches, row.environment, row.tenant) == (
                "completed",
                7,
                3,
                "development",
                None,
            )
            assert ledger[0].checkpoints == [1, 2, 3]

    async def test_a_completed_sweep_blocks_a_rerun_and_the_rerun_handles_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only `completed` blocks: a second run of the declaration skips, naming the run
        that applied it, and writes no row of its own."""
        source = Source()
        sweep = backfill(
            "fill_totals",
            fetch=source.fetch,
            handle=source.handle,
            ledger=lambda: app.backend.backfills,
            batch=3,
            queue=QUEUE,
        )
        async with parity.app([sweep]) as app:
            first = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            second = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            assert source.handled == ROWS
            applied = await app.get_job(first.job_id)
            again = await app.get_job(second.job_id)
            assert again.state == "completed"
            assert (await sweep.result(second.job_id))["applied_by"] == applied.run_id
            assert app.backend.backfills is not None
            assert await app.backend.backfills.get(again.run_id) is None
            assert await app.get_steps(second.job_id) == []


class TestAtLeastOnce:
    async def test_a_failed_batch_runs_again_and_the_replayed_batches_write_no_ledger_row(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `handle` is at least once — the failed batch runs again on the retry; the batches
        before it replay from their steps: not handled again and not checkpointed again."""
        source = Source(fail_on=5)
        ledger: list[CountingLedger] = []
        sweep = backfill(
            "fill_totals",
            fetch=source.fetch,
            handle=source.handle,
            ledger=lambda: ledger[0],
            batch=3,
            queue=QUEUE,
            retry=NOW_RETRY,
        )
        async with parity.app([sweep]) as app:
            assert app.backend.backfills is not None
            ledger.append(CountingLedger(app.backend.backfills))
            run = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
            assert (record.state, record.attempt) == ("completed", 2)
            assert source.handled == ROWS
            assert ledger[0].checkpoints == [1, 2, 3]
            row = await app.backend.backfills.get(record.run_id)
            assert row is not None
            assert (row.status, row.count, row.batches, row.error) == ("completed", 7, 3, None)

    async def test_a_source_still_holding_rows_after_the_last_batch_is_stalled(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `count` is read after the last batch; rows left fail the run for good (dead) with
        `XJOBS_BACKFILL_STALLED`, and the row says failed (which does not block a rerun)."""
        source = Source(stalled=2)
        sweep = backfill(
            "fill_totals",
            fetch=source.fetch,
            handle=source.handle,
            count=source.count,
            ledger=lambda: app.backend.backfills,
            batch=3,
            queue=QUEUE,
            retry=NOW_RETRY,
        )
        async with parity.app([sweep]) as app:
            run = await app.enqueue(sweep, {})
            await app.run_worker(until_idle=True)
            record = await app.get_job(run.job_id)
            assert record.state == "dead"
            assert "XJOBS_BACKFILL_STALLED" in (record.last_error or "")
            assert app.backend.backfills is not None
            row = await app.backend.backfills.get(record.run_id)
            assert row is not None
            assert row.status == "failed"
            assert "XJOBS_BACKFILL_STALLED" in (row.error or "")
            assert (
                await app.backend.backfills.completed(
                    "fill_totals", row.checksum, "development", None
                )
                is None
            )
