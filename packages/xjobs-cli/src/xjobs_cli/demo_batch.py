"""The demo's batch on its backend: the jobs an earlier run left live, resumed, or a fresh batch.

A durable file holds one batch at a time: a run that finds live demo jobs serves them (and
enqueues only a kind the killed run had not enqueued yet); a run that finds only finished ones
removes them and starts over.
"""

from __future__ import annotations

from dataclasses import dataclass

import xjobs
from xjobs.contract.driver import LIVE_STATES
from xjobs.contract.introspection import MAX_BULK_BATCH, MAX_JOB_PAGE, JobFilter, JobSummary
from xjobs_cli import demo


@dataclass(frozen=True, slots=True)
class Batch:
    """The batch's job ids by job name, and how many of them an earlier run left live."""

    ids: dict[str, list[str]]
    resumed: int

    @property
    def size(self) -> int:
        """How many jobs the batch holds."""
        return sum(map(len, self.ids.values()))


async def stored_jobs(app: xjobs.App) -> list[JobSummary]:
    """Every demo job the backend holds, page by page."""
    names = {kind.name for kind in demo.KINDS}
    found: list[JobSummary] = []
    after: str | None = None
    while True:
        page = await app.operator.list_jobs(limit=MAX_JOB_PAGE, after=after)
        found.extend(job for job in page.jobs if job.name in names)
        if page.cursor is None:
            return found
        after = page.cursor


async def _clear(app: xjobs.App) -> None:
    for kind in demo.KINDS:
        where = JobFilter(name=kind.name)
        while (await app.operator.remove_where(where, limit=MAX_BULK_BATCH)).remaining:
            pass


async def open_batch(app: xjobs.App) -> Batch:
    """Resume the live batch an earlier run left, else clear a finished one and enqueue anew."""
    stored = await stored_jobs(app)
    live = sum(1 for job in stored if job.state in LIVE_STATES)
    if not live:
        if stored:
            await _clear(app)
        return Batch(await demo.enqueue_batch(app), resumed=0)
    ids: dict[str, list[str]] = {kind.name: [] for kind in demo.KINDS}
    for job in reversed(stored):  # oldest first, as the batch was enqueued
        ids[job.name].append(job.id)
    missing = tuple(kind for kind in demo.KINDS if not ids[kind.name])
    ids.update(await demo.enqueue_batch(app, missing))
    return Batch(ids, resumed=live)
