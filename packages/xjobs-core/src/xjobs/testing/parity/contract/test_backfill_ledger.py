"""Parity: the backfill ledger at the store level — keyed by run, checkpoints, the verdict only `completed` gives (backfills.py, "BackfillLedger")."""

from __future__ import annotations

import json

import pytest

from xjobs.contract.backfills import BackfillLedger, BackfillStart
from xjobs.errors import OptionInvalidError
from xjobs.ids import new_id
from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("backfills")]


def _ledger(parity: ParityEnv) -> BackfillLedger:
    ledger = parity.backend.backfills
    assert ledger is not None, 'mark the scenario @pytest.mark.requires("backfills")'
    return ledger


def _start(
    name: str = "fill_totals",
    checksum: str = "c1",
    environment: str = "production",
    tenant: str | None = None,
) -> BackfillStart:
    return BackfillStart(new_id(), new_id(), name, checksum, environment, tenant)


class TestARun:
    async def test_a_run_begins_running_at_zero_and_checkpoints_absolute_values(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a row is keyed by run; a checkpoint sets the cursor, count and batches (not adds),
        so a repeated checkpoint records nothing twice."""
        ledger, start = _ledger(parity), _start()
        await ledger.begin(start)
        row = await ledger.get(start.run_id)
        assert row is not None
        assert (row.status, row.cursor, row.count, row.batches, row.error) == (
            "running",
            None,
            0,
            0,
            None,
        )
        assert (row.name, row.checksum, row.environment, row.tenant, row.job_id) == (
            "fill_totals",
            "c1",
            "production",
            None,
            start.job_id,
        )
        assert row.started_at_ms == row.updated_at_ms == parity.clock.now_ms()
        parity.clock.advance(1_000)
        assert await ledger.checkpoint(start.run_id, json.dumps({"id": 100}), 100, 1)
        assert await ledger.checkpoint(start.run_id, json.dumps({"id": 100}), 100, 1)
        row = await ledger.get(start.run_id)
        assert row is not None
        assert (row.cursor, row.count, row.batches) == ('{"id": 100}', 100, 1)
        assert row.updated_at_ms == parity.clock.now_ms()
        assert row.finished_at_ms is None

    async def test_a_run_that_begins_again_keeps_its_position_and_loses_its_error(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a retry begins the same run again: running, its cursor and count kept, its error
        and finish cleared; its start stays."""
        ledger, start = _ledger(parity), _start()
        await ledger.begin(start)
        started = parity.clock.now_ms()
        assert await ledger.checkpoint(start.run_id, '"k-7"', 7, 2)
        parity.clock.advance(500)
        assert await ledger.finish(start.run_id, "failed", "the source went away")
        failed = await ledger.get(start.run_id)
        assert failed is not None
        assert (failed.status, failed.error, failed.finished_at_ms) == (
            "failed",
            "the source went away",
            parity.clock.now_ms(),
        )
        parity.clock.advance(500)
        await ledger.begin(start)
        again = await ledger.get(start.run_id)
        assert again is not None
        assert (again.status, again.cursor, again.count, again.batches) == (
            "running",
            '"k-7"',
            7,
            2,
        )
        assert (again.error, again.finished_at_ms, again.started_at_ms) == (None, None, started)

    async def test_only_a_running_row_checkpoints_and_a_missing_run_changes_nothing(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a checkpoint of a finished run or of no run answers False and writes nothing."""
        ledger, start = _ledger(parity), _start()
        assert not await ledger.checkpoint(start.run_id, None, 1, 1)
        assert not await ledger.finish(start.run_id, "completed", None)
        assert await ledger.get(start.run_id) is None
        await ledger.begin(start)
        assert await ledger.finish(start.run_id, "completed", None)
        assert not await ledger.checkpoint(start.run_id, '"late"', 99, 9)
        row = await ledger.get(start.run_id)
        assert row is not None
        assert (row.status, row.cursor, row.count) == ("completed", None, 0)

    async def test_a_long_error_is_cut_and_a_status_that_is_not_an_ending_is_refused(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the stored error is at most 2000 characters; `finish` takes completed or failed."""
        ledger, start = _ledger(parity), _start()
        await ledger.begin(start)
        with pytest.raises(OptionInvalidError):
            await ledger.finish(start.run_id, "running", None)
        assert await ledger.finish(start.run_id, "failed", "x" * 5_000)
        row = await ledger.get(start.run_id)
        assert row is not None
        assert row.error == "x" * 2_000


class TestTheVerdict:
    async def test_only_completed_blocks_and_only_for_its_declaration_environment_and_tenant(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the verdict is a completed row of the same name, checksum, environment and tenant;
        a running or failed run gives none."""
        ledger = _ledger(parity)
        running, failed, done = _start(), _start(), _start()
        for start in (running, failed, done):
            await ledger.begin(start)
        assert await ledger.finish(failed.run_id, "failed", "boom")
        assert await ledger.completed("fill_totals", "c1", "production", None) is None
        parity.clock.advance(10)
        assert await ledger.finish(done.run_id, "completed", None)
        verdict = await ledger.completed("fill_totals", "c1", "production", None)
        assert verdict is not None
        assert (verdict.run_id, verdict.status) == (done.run_id, "completed")
        assert await ledger.completed("fill_totals", "c2", "production", None) is None
        assert await ledger.completed("fill_totals", "c1", "staging", None) is None
        assert await ledger.completed("fill_totals", "c1", "production", "org-1") is None
        assert await ledger.completed("other", "c1", "production", None) is None

    async def test_the_earliest_completion_is_the_verdict_and_a_tenant_has_its_own(
        self, parity: ParityEnv
    ) -> None:
        """Rule: two completed runs of one declaration: the verdict names the one that finished
        first; a tenant-scoped sweep's verdict is per tenant."""
        ledger = _ledger(parity)
        first, second = _start(tenant="org-1"), _start(tenant="org-1")
        other = _start(tenant="org-2")
        for start in (first, second, other):
            await ledger.begin(start)
        assert await ledger.finish(first.run_id, "completed", None)
        parity.clock.advance(10)
        assert await ledger.finish(second.run_id, "completed", None)
        verdict = await ledger.completed("fill_totals", "c1", "production", "org-1")
        assert verdict is not None
        assert verdict.run_id == first.run_id
        assert await ledger.completed("fill_totals", "c1", "production", "org-2") is None
        assert await ledger.completed("fill_totals", "c1", "production", None) is None


class TestTheListing:
    async def test_rows_come_newest_first_per_sweep_or_all_within_the_bound(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `rows()` is newest start first (then run id), of one sweep or all, at most
        `limit`; a limit outside 1..1000 is refused."""
        ledger = _ledger(parity)
        older, newer, elsewhere = _start(), _start(), _start(name="fill_names")
        await ledger.begin(older)
        parity.clock.advance(10)
        await ledger.begin(newer)
        parity.clock.advance(10)
        await ledger.begin(elsewhere)
        assert [r.run_id for r in await ledger.rows("fill_totals")] == [
            newer.run_id,
            older.run_id,
        ]
        assert [r.run_id for r in await ledger.rows()] == [
            elsewhere.run_id,
            newer.run_id,
            older.run_id,
        ]
        assert [r.run_id for r in await ledger.rows(limit=1)] == [elsewhere.run_id]
        assert await ledger.rows("nothing") == []
        for bad in (0, 1_001):
            with pytest.raises(OptionInvalidError):
                await ledger.rows(limit=bad)
