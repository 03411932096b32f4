"""`JobIntrospection`: the operator contract every backend implements, its records and its bounds.

Everything an operator sees or steers goes through this protocol (the CLI, the web page and the
metrics add no query of their own). Core validates every argument before a driver sees it: a
driver receives a clean `JobFilter`, a decoded `JobPosition` and a limit within the bounds below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from xjobs.contract.driver import BulkResult, JobMove, JobState

# -- bounds -----------------------------------------------------------------------------------------

DEFAULT_JOB_PAGE: Final = 50
MAX_JOB_PAGE: Final = 500
# One bulk verb moves at most this many jobs per call; `BulkResult.remaining` says what is left.
MAX_BULK_BATCH: Final = 1000
# Each attempt's error is kept, the oldest dropped past this many per job.
MAX_ERROR_HISTORY: Final = 25
# A queue's counts are bounded scans: a count at the cap reads "at least this many". The cap keeps
# every operator read near a millisecond whatever the table holds (counting to 10,000 index
# entries cost Postgres 3.5 ms beside a million rows); how long the oldest due job has waited,
# which is exact, is what a backlog alert reads.
COUNT_CAP: Final = 1_000

# -- counters ---------------------------------------------------------------------------------------

MINUTE_MS: Final = 60_000
HOUR_MS: Final = 60 * MINUTE_MS
DAY_MS: Final = 24 * HOUR_MS
CounterTier = Literal["minute", "hour", "day"]
TIER_MS: Final[dict[str, int]] = {"minute": MINUTE_MS, "hour": HOUR_MS, "day": DAY_MS}
# What a counter counts: the endings an operator reads throughput and failure rate from, and the
# rate limiter's deferrals (so an operator sees a job held back by its rate). A shed, a
# suspension, a hand-back and a drain's interruption add nothing.
COUNTED_OUTCOMES: Final[frozenset[str]] = frozenset(
    {"completed", "retried", "dead-lettered", "dropped", "refused", "cancelled", "deferred"}
)

PauseKind = Literal["queue", "job"]


def bucket_of(at_ms: int, tier: CounterTier = "minute") -> int:
    """The start of the counter bucket of `tier` that `at_ms` falls in (epoch ms, UTC)."""
    size = TIER_MS[tier]
    return at_ms - at_ms % size


# -- records ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a list or a bulk verb reads: every given field must match (empty `states`: any)."""

    states: tuple[JobState, ...] = ()
    queue: str | None = None
    name: str | None = None
    tenant: str | None = None
    created_after_ms: int | None = None
    created_before_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RequeueFilter:
    """Which finished jobs `App.requeue_jobs` moves: by state, and optionally one queue or one job
    name, at most `limit` per call (the operator surface's `retry_many` does the work)."""

    states: tuple[Literal["dead", "failed", "cancelled"], ...] = ("dead",)
    queue: str | None = None
    name: str | None = None
    limit: int = 1000

    def as_job_filter(self) -> JobFilter:
        """The same selection as an operator filter."""
        return JobFilter(states=self.states, queue=self.queue, name=self.name)


@dataclass(frozen=True, slots=True)
class JobPosition:
    """A keyset position: the last row of the previous page; the next page is strictly older."""

    created_at_ms: int
    id: str


@dataclass(frozen=True, slots=True)
class JobSummary:
    """One job as a list shows it (no payload)."""

    id: str
    name: str
    queue: str
    state: JobState
    tenant_id: str | None
    priority: int
    attempt: int
    max_attempts: int
    run_at_ms: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int | None
    claimed_by: str | None
    progress: float | None
    last_error: str | None

    @property
    def position(self) -> JobPosition:
        """Where the page after this row starts."""
        return JobPosition(self.created_at_ms, self.id)


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a list, newest first by `(created_at, id)`; `cursor` is `None` on the last page."""

    jobs: tuple[JobSummary, ...]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class AttemptError:
    """The error one attempt ended with, as the settle stored it (`text` is `Class: message\\ntraceback`)."""

    job_id: str
    attempt: int
    worker_id: str | None
    at_ms: int
    text: str

    @property
    def error_class(self) -> str:
        """The error's class name, the part before the first `: ` of the first line."""
        head = self.text.split("\n", 1)[0]
        return head.split(": ", 1)[0] if ": " in head else head

    @property
    def message(self) -> str:
        """The error's message: the rest of the first line."""
        head = self.text.split("\n", 1)[0]
        return head.split(": ", 1)[1] if ": " in head else ""

    @property
    def traceback(self) -> str:
        """The bounded traceback after the first line (empty when none was stored)."""
        parts = self.text.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """One queue as an operator reads it. Each count is a bounded scan, at most `COUNT_CAP`.

    `ready` is due now, `scheduled` is ready with a future `run_at` (delayed or retrying);
    `oldest_ready_ms` is the `run_at` of the longest-due ready job (`None` when none is due).
    """

    queue: str
    ready: int
    scheduled: int
    running: int
    waiting: int
    dead: int
    failed: int
    oldest_ready_ms: int | None
    paused: bool


@dataclass(frozen=True, slots=True)
class CounterBucket:
    """How many runs of one job name ended with one outcome within one bucket of a tier."""

    tier: CounterTier
    bucket_ms: int
    name: str
    outcome: str
    count: int


@dataclass(frozen=True, slots=True)
class Pause:
    """A pause row the claim reads: a whole queue, or one job name in every queue."""

    kind: PauseKind
    name: str
    paused_at_ms: int


# -- the protocol -----------------------------------------------------------------------------------


@runtime_checkable
class JobIntrospection(Protocol):
    """The operator's view and verbs over one backend's jobs, pauses and counters.

    Only `cancel_many` bumps a counter (`cancelled`, per job, as `cancel` does); each method's
    duties are tabled in docs/writing-a-driver.md.
    """

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        """Up to `limit` jobs matching `where`, newest first by `(created_at_ms, id)`, strictly
        older than `after` when given. The cost of a page does not grow with the table."""
        ...

    async def errors(self, job_id: str) -> list[AttemptError]:
        """Every stored attempt error of a job, oldest first (at most `MAX_ERROR_HISTORY`)."""
        ...

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        """Every known queue (one with jobs or a pause), sorted by name; counts as of `now_ms`."""
        ...

    async def counters(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        """The buckets of `tier` starting at or after `since_ms`, by bucket, name, outcome."""
        ...

    async def rollup_counters(self, now_ms: int) -> int:
        """Fold every closed minute bucket into its hour and day, at most once a bucket;
        answers how many minute buckets it folded."""
        ...

    async def pause(self, kind: PauseKind, name: str) -> bool:
        """Write a pause row (the claim skips what it names); answers whether it was not paused."""
        ...

    async def resume(self, kind: PauseKind, name: str) -> bool:
        """Delete a pause row; answers whether it was paused."""
        ...

    async def pauses(self) -> list[Pause]:
        """Every pause row, by kind then name."""
        ...

    async def promote(self, job_id: str) -> JobMove:
        """Make a `ready` job due now (a delayed or retrying one): `done`; a running or waiting
        job is `live`, a finished one `finished`, an unknown id `missing`."""
        ...

    async def remove(self, job_id: str) -> JobMove:
        """Delete a finished job with its steps and errors: `done` (the record as it was); a live
        job is `live`, an unknown id `missing`."""
        ...

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        """Cancel up to `limit` live jobs matching `where` (oldest first)."""
        ...

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Make up to `limit` matching `ready` jobs due now (oldest first)."""
        ...

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Delete up to `limit` matching finished jobs with their steps and errors (oldest first)."""
        ...

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        """Requeue up to `limit` matching finished jobs (oldest first), each as `requeue` would;
        a job whose namespace a live row holds is skipped and not counted as remaining."""
        ...


def only_states(where: JobFilter, allowed: Sequence[str]) -> tuple[str, ...]:
    """The states a bulk verb may touch: `where.states` within `allowed` (all of them when empty)."""
    if not where.states:
        return tuple(allowed)
    return tuple(s for s in where.states if s in allowed)
