"""Retention: how long finished work is kept (`Retention`), the instants one purge pass cuts at, and what a backend deletes (`RetentionStore`).

The pacing of a pass (batches and rests) is the purge's, in `xjobs.factories.purge_target`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final, Literal, Protocol, runtime_checkable

from xjobs.contract.introspection import CounterTier
from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms, finite_count, finite_option

# The stores a purge pass visits, in this order (each is one durable step of the purge job).
PurgeStore = Literal["jobs", "events", "outbox", "workers", "counters"]
PURGE_STORES: Final[tuple[PurgeStore, ...]] = ("jobs", "events", "outbox", "workers", "counters")
# The finished states a policy keeps for a while (`failed` is failed for good: dropped or refused).
RETAINED_STATES: Final[tuple[str, ...]] = ("completed", "cancelled", "failed", "dead")
COUNTER_TIERS: Final[tuple[CounterTier, ...]] = ("minute", "hour", "day")
DEFAULT_PURGE_BATCH: Final = 1_000
MAX_PURGE_BATCH: Final = 10_000
# A pass stops a store after this many batches (the next pass goes on): a pass always ends.
MAX_BATCHES_PER_PASS: Final = 10_000
# The share of a purge's time spent in its batches: the rest it sleeps, so the hot path's claims
# and settles (and the autovacuum behind the deletes) get the database (W9 in the bench).
DEFAULT_PURGE_DUTY: Final = 0.25
DAY: Final = timedelta(days=1)


def _kept_ms(name: str, value: object) -> int:
    return duration_ms(f"retention {name}", value)


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each kind of finished work is kept before the purge deletes it.

    An `App` keeps `DEFAULT_RETENTION` (these defaults) unless told otherwise: completed and
    cancelled jobs a day, failed and dead ones a week; `App(retention=None)` keeps everything.
    A job is kept from the instant it finished (its steps, attempt errors and event wait go with
    it); a sent event from its send (a wait past its deadline goes too); a published outbox row
    from its publication; a worker row from its expiry; a counter bucket from its start (a minute
    bucket only once it is folded into its hour and day). A job declared with
    `@job(retention=...)` is kept that long in every finished state instead.
    The purge job runs on `cron` (UTC) on the scheduler's leader, in `queue`, `batch` rows a
    transaction. It is paced by a duty cycle: after a batch that took `d`, it sleeps
    `d × (1 − duty) / duty`, at least `pause`, so it holds the database `duty` of the time
    whatever the load (a slow batch on a busy database buys a longer rest; a backlog of a million
    rows takes longer, the claims and settles beside it keep their pace).
    """

    completed: timedelta = DAY
    cancelled: timedelta = DAY
    failed: timedelta = 7 * DAY
    dead: timedelta = 7 * DAY
    events: timedelta = 7 * DAY
    outbox: timedelta = timedelta(hours=1)
    workers: timedelta = DAY
    counters_minute: timedelta = 2 * DAY
    counters_hour: timedelta = 30 * DAY
    counters_day: timedelta = 365 * DAY
    cron: str = "*/5 * * * *"
    queue: str = "default"
    batch: int = DEFAULT_PURGE_BATCH
    pause: timedelta = timedelta(milliseconds=5)
    duty: float = DEFAULT_PURGE_DUTY
    # Each `timedelta` above in ms, validated once.
    kept_ms: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = {
            name: _kept_ms(name, getattr(self, name))
            for name in (
                *RETAINED_STATES,
                "events",
                "outbox",
                "workers",
                "counters_minute",
                "counters_hour",
                "counters_day",
            )
        }
        if kept["counters_minute"] < 3_600_000:
            raise OptionInvalidError(
                "retention counters_minute must be at least an hour (a minute bucket is folded "
                f"into its hour before it may go), got {self.counters_minute!r}"
            )
        finite_count("retention batch", self.batch, minimum=1, maximum=MAX_PURGE_BATCH)
        duration_ms("retention pause", self.pause, allow_zero=True)
        pacing_duty(self.duty)
        object.__setattr__(self, "kept_ms", kept)

    def cut(self, now_ms: int, per_job: Mapping[str, int] | None = None) -> PurgeCut:
        """The instants one pass at `now_ms` cuts at; `per_job` is each job name's own keep, in ms."""
        kept = self.kept_ms
        return PurgeCut(
            now_ms=now_ms,
            jobs={state: now_ms - kept[state] for state in RETAINED_STATES},
            job_names={name: now_ms - ms for name, ms in sorted((per_job or {}).items())},
            events=now_ms - kept["events"],
            outbox=now_ms - kept["outbox"],
            workers=now_ms - kept["workers"],
            counters={tier: now_ms - kept[f"counters_{tier}"] for tier in COUNTER_TIERS},
        )

    def ttl_ms(self, state: str, per_job_ms: int | None) -> int:
        """How long a job that finished in `state` is kept (its own keep when it declares one)."""
        return per_job_ms if per_job_ms is not None else self.kept_ms[state]


def pacing_duty(duty: object) -> float:
    """A duty cycle in (0, 1] (1: no rest but the pause), or `OptionInvalidError`."""
    value = finite_option("retention duty", duty, maximum=1.0)
    if value <= 0:
        raise OptionInvalidError(f"retention duty must be above 0, got {duty!r}")
    return value


# The policy an `App` keeps when it is given none: retention is on by default.
DEFAULT_RETENTION: Final = Retention()


@dataclass(frozen=True, slots=True)
class PurgeCut:
    """One pass's instants, from ONE clock reading: a row older than its store's instant goes.

    `jobs` is per finished state (finished before); `job_names` overrides it for a job name in
    every finished state; `counters` is per tier (bucket start before).
    """

    now_ms: int
    jobs: Mapping[str, int]
    job_names: Mapping[str, int]
    events: int
    outbox: int
    workers: int
    counters: Mapping[CounterTier, int]

    def job_cutoff(self, name: str, state: str) -> int | None:
        """Before which instant a job of `name` that finished in `state` goes (`None`: never)."""
        own = self.job_names.get(name)
        return own if own is not None else self.jobs.get(state)


@dataclass(frozen=True, slots=True)
class Keep:
    """The policy as a settling backend reads it: how long a job of a name that finished in a state is kept."""

    retention: Retention
    per_job_ms: Mapping[str, int]

    def ttl_ms(self, name: str, state: str) -> int:
        """The keep of one finished job, in ms."""
        return self.retention.ttl_ms(state, self.per_job_ms.get(name))


@runtime_checkable
class RetentionStore(Protocol):
    """What a backend deletes when the purge asks: rows of one store older than a cut, a batch at a time.

    Every batch is one short transaction (or one script) that walks an index from its oldest
    entry, never a table scan, and never takes a lock a claim waits on. A job goes with its
    steps, its attempt errors and its event wait; counters are never touched by a job's purge.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    def keep(self, policy: Keep | None) -> None:
        """Adopt the app's policy (`None`: retention off). A backend that expires a finished job
        itself (Redis: an expiry set by the settling script) reads it from then on; one that
        only deletes when asked may ignore it."""
        ...

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        """Delete at most `limit` rows of `store` older than `cut`; answers how many went.

        Fewer than `limit` means nothing of the store is left to purge at this cut.
        """
        ...

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        """How many rows of `store` a purge at `cut` would delete now (the dry run); deletes nothing."""
        ...


@runtime_checkable
class PurgeTarget(Protocol):
    """One thing the purge job purges, in one durable step: named, and cut at the pass's one instant."""

    @property
    def name(self) -> str:
        """The target's name: its step's name and its key in the report (unique in one purge)."""
        ...

    async def purge_expired(self, now_ms: int) -> int:
        """Delete everything expired at `now_ms`; answers how many went."""
        ...

    async def count_expired(self, now_ms: int) -> int:
        """How many `purge_expired(now_ms)` would delete; deletes nothing."""
        ...
