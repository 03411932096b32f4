"""One pass of a sweep: the batched iteration, its cursor checkpoints (a step each, positional) and its ledger row."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from xjobs.contract.backfills import BackfillLedger, BackfillStart
from xjobs.errors import CapabilityMissingError, DrainingError, LeaseLostError
from xjobs.factories.backfill_errors import BackfillCursorError, BackfillStalledError
from xjobs.factories.backfill_gate import current_environment, refuse_environment
from xjobs.factories.backfill_rate import Throttle
from xjobs.factories.backfill_scope import ScopedInput, tenant_of
from xjobs.factories.backfill_spec import BackfillSpec
from xjobs.run.context import JobContext

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One batch as the source answers it: its items and the cursor after them (`None`: the end)."""

    items: Sequence[T]
    cursor: Any = None


Fetch = Callable[[Any, int, str | None], Awaitable[Page[T]]]
Handle = Callable[[list[T], str | None], Awaitable[None]]
Count = Callable[[str | None], Awaitable[int]]
LedgerSource = Callable[[], BackfillLedger | None]


@dataclass(frozen=True, slots=True)
class Source(Generic[T]):
    """Where a sweep reads (`fetch(cursor, limit, tenant)`), what it does with a batch
    (`handle(items, tenant)`, AT LEAST ONCE), and how many rows are still to sweep (`count`)."""

    fetch: Fetch[T]
    handle: Handle[T]
    count: Count | None


def batch_step(position: int) -> str:
    """The step name of the batch at `position` (0 first): positional, never derived from data."""
    return f"batch-{position}"


def check_cursor(cursor: Any, previous: Any, name: str) -> None:
    """`BackfillCursorError` when the next cursor is not JSON or repeats the previous one (no progress)."""
    try:
        json.dumps(cursor, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BackfillCursorError(f"backfill {name!r}: the cursor {cursor!r} is not JSON") from exc
    if cursor is not None and cursor == previous:
        raise BackfillCursorError(f"backfill {name!r}: the source answered cursor {cursor!r} again")


class Sweep(Generic[T]):
    """One run's iteration: each batch is one durable step that persists the CURSOR and the
    running count, never the page. Only a batch that RAN (not replayed) checkpoints the ledger."""

    def __init__(
        self, ctx: JobContext, spec: BackfillSpec, source: Source[T], ledger: BackfillLedger
    ) -> None:
        self._ctx = ctx
        self._spec = spec
        self._source = source
        self._ledger = ledger
        self._throttle = Throttle(spec.interval_s, lambda: ctx.cancelled)

    async def _batch(self, cursor: Any, count: int, tenant: str | None) -> dict[str, Any]:
        await self._throttle.wait()  # spent INSIDE the step: a replayed batch waits for nothing
        page = await self._source.fetch(cursor, self._spec.batch, tenant)
        items = list(page.items)
        if items:
            await self._source.handle(items, tenant)
        done = page.cursor is None or not items
        if not done:
            check_cursor(page.cursor, cursor, self._spec.name)
        return {"cursor": None if done else page.cursor, "count": count + len(items), "done": done}

    async def run(self, tenant: str | None) -> dict[str, Any]:
        """Every batch from the start (a replay answers the recorded ones), then the `count` check."""
        cursor: Any = None
        count = position = 0
        while True:
            ran = False

            async def one(cursor: Any = cursor, count: int = count) -> dict[str, Any]:
                nonlocal ran
                ran = True
                return await self._batch(cursor, count, tenant)

            state = await self._ctx.step.run(batch_step(position), one)
            position += 1
            cursor, count = state["cursor"], int(state["count"])
            if ran:  # a replayed batch writes no ledger row
                await self._ledger.checkpoint(self._ctx.run_id, json.dumps(cursor), count, position)
            if state["done"]:
                break
        await self._check_count(tenant)
        return {"count": count, "batches": position}

    async def _check_count(self, tenant: str | None) -> None:
        if self._source.count is None:
            return
        left = await self._source.count(tenant)
        if left > 0:
            raise BackfillStalledError(
                f"backfill {self._spec.name!r} finished its last batch with {left} rows still to sweep"
            )


def _ledger(source: LedgerSource, name: str) -> BackfillLedger:
    ledger = source()
    if ledger is None:
        raise CapabilityMissingError(f"backfill {name!r} needs a backend with a backfill ledger")
    return ledger


async def backfill_pass(
    ctx: JobContext,
    spec: BackfillSpec,
    source: Source[T],
    ledger_source: LedgerSource,
    value: ScopedInput,
) -> dict[str, Any]:
    """One run: refuse the wrong environment, skip a sweep completed here by another run, record
    the run `running`, sweep, then settle its row `completed` (or `failed`, and raise)."""
    tenant = tenant_of(spec.scope, value, what=f"backfill {spec.name!r}")
    environment = current_environment()
    refuse_environment(spec, environment)
    ledger = _ledger(ledger_source, spec.name)
    done = await ledger.completed(spec.name, spec.checksum, environment, tenant)
    if done is not None:
        return {"count": done.count, "batches": done.batches, "applied_by": done.run_id}
    start = BackfillStart(ctx.run_id, ctx.job_id, spec.name, spec.checksum, environment, tenant)
    await ledger.begin(start)
    try:
        report = await Sweep(ctx, spec, source, ledger).run(tenant)
    except (LeaseLostError, DrainingError):
        raise  # the run goes on elsewhere, or later: its row stays running
    except Exception as exc:
        await ledger.finish(ctx.run_id, "failed", str(exc))
        raise
    await ledger.finish(ctx.run_id, "completed", None)
    return report
