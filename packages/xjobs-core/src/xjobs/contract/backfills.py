"""`BackfillLedger`: what each backend records of the backfills that RAN — one row per run, its cursor, count and verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from xjobs.errors import OptionInvalidError
from xjobs.options import finite_count

BackfillStatus = Literal["running", "completed", "failed"]
BACKFILL_STATUSES: Final[tuple[BackfillStatus, ...]] = ("running", "completed", "failed")
# A ledger listing answers at most this many rows (newest first).
MAX_BACKFILL_ROWS: Final = 1_000
# A stored error is cut to this many characters.
MAX_BACKFILL_ERROR_CHARS: Final = 2_000


def finished_status(status: object) -> BackfillStatus:
    """A status a run settles in (`completed` or `failed`), or `OptionInvalidError`."""
    if status == "completed" or status == "failed":
        return status
    raise OptionInvalidError(f"a backfill run settles completed or failed, not {status!r}")


def rows_limit(limit: object) -> int:
    """A listing's bound: 1 to `MAX_BACKFILL_ROWS`, or `OptionInvalidError`."""
    return finite_count("backfill rows limit", limit, minimum=1, maximum=MAX_BACKFILL_ROWS)


def cut_error(error: str | None) -> str | None:
    """An error as stored: cut to `MAX_BACKFILL_ERROR_CHARS` characters."""
    return None if error is None else error[:MAX_BACKFILL_ERROR_CHARS]


@dataclass(frozen=True, slots=True)
class BackfillStart:
    """A run of a sweep as it begins: the run it is, the declaration's name and checksum, where it runs and for whom.

    `tenant` is `None` for a cross-tenant sweep (`tenant="none"`), else the one tenant it sweeps.
    """

    run_id: str
    job_id: str
    name: str
    checksum: str
    environment: str
    tenant: str | None


@dataclass(frozen=True, slots=True)
class BackfillRow:
    """One run's ledger row: what was swept (`count` rows in `batches` batches, up to `cursor`)."""

    run_id: str
    job_id: str
    name: str
    checksum: str
    environment: str
    tenant: str | None
    status: BackfillStatus
    cursor: str | None  # the JSON of the cursor after the last recorded batch (`None`: none yet)
    count: int
    batches: int
    error: str | None
    started_at_ms: int
    updated_at_ms: int
    finished_at_ms: int | None


@runtime_checkable
class BackfillLedger(Protocol):
    """`x_backfills`: keyed by RUN. Only a `completed` row blocks a sweep from running again.

    Every write names its run; a write for a run that has no row (or, for `checkpoint`, a
    finished one) changes nothing and answers `False`. Optional, like every store but `jobs`: a
    backend that has it declares the `backfills` capability. Nothing here bumps a counter.
    """

    async def begin(self, start: BackfillStart) -> None:
        """Record that a run of a sweep started (again, on a retry): its row is `running`; a row
        that exists keeps its cursor, count and batches, and loses its error and finish."""
        ...

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        """Record the run's position after a batch that RAN (never one replayed): the cursor's
        JSON and the absolute count and batch number, so a repeated write records nothing twice."""
        ...

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        """Settle the run's row as `completed` or `failed` (with its error, cut to 2000 characters)."""
        ...

    async def get(self, run_id: str) -> BackfillRow | None:
        """One run's row."""
        ...

    async def rows(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        """The rows (of one sweep, or all), newest start first, then run id."""
        ...

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> BackfillRow | None:
        """The verdict: the earliest `completed` row of this declaration (name and checksum) in
        this environment for this tenant (`None`: cross-tenant), or `None` when none completed."""
        ...
