"""Parity: a source whose next cursor is not JSON, or repeats the previous one, fails the sweep for
good with `XJOBS_BACKFILL_CURSOR` (semantics.md, "Factories")."""

from __future__ import annotations

from typing import Any

import pytest

from xjobs.factories.backfill import backfill
from xjobs.factories.backfill_pass import Page
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import NOW_RETRY, QUEUE

pytestmark = [
    pytest.mark.xjobs_parity,
    pytest.mark.requires("backfills"),
    pytest.mark.requires("steps"),
]


class FixedCursor:
    """A source that answers a full page and the same `cursor` every time it is asked."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.handled: list[int] = []

    async def fetch(self, cursor: Any, limit: int, tenant: str | None) -> Page[int]:
        return Page(list(range(limit)), self.cursor)

    async def handle(self, items: list[int], tenant: str | None) -> None:
        self.handled.extend(items)


@pytest.mark.parametrize(
    ("cursor", "said"),
    [(7, "again"), (object(), "not JSON"), (float("nan"), "not JSON")],
    ids=["repeated", "object", "nan"],
)
async def test_a_cursor_that_repeats_or_is_not_json_fails_the_sweep_for_good(
    parity: ParityEnv, cursor: Any, said: str
) -> None:
    """Rule: the cursor after a batch must be JSON and must move; otherwise the run is dead with
    `XJOBS_BACKFILL_CURSOR` on its first attempt (never retried), and its ledger row says failed."""
    source = FixedCursor(cursor)
    sweep = backfill(
        "fill_cursor",
        fetch=source.fetch,
        handle=source.handle,
        ledger=lambda: app.backend.backfills,
        batch=2,
        queue=QUEUE,
        retry=NOW_RETRY,
    )
    async with parity.app([sweep]) as app:
        run = await app.enqueue(sweep, {})
        await app.run_worker(until_idle=True)
        record = await app.get_job(run.job_id)
        assert (record.state, record.attempt) == ("dead", 1)
        assert "XJOBS_BACKFILL_CURSOR" in (record.last_error or "")
        assert said in (record.last_error or "")
        assert app.backend.backfills is not None
        row = await app.backend.backfills.get(record.run_id)
        assert row is not None
        assert row.status == "failed"
        assert "XJOBS_BACKFILL_CURSOR" in (row.error or "")
