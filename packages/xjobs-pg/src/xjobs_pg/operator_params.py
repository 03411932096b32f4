"""The operator surface's statement parameters (listing, bulk, ledger, promote): a record each, whose one `bind()` is its `$n` order.

A statement that reads a `JobFilter` binds it first, as `filter_columns` lists it ($1..$6). The
open ends of a range are bound as the extremes of bigint (and the last uuid), never as a null
the statement would test with an `or`, so each bound stays an index condition of `jobs_listed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xjobs.contract.introspection import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    JobFilter,
    JobPosition,
)
from xjobs_pg.params import Bound

MIN_BIGINT = -(2**63)
MAX_BIGINT = 2**63 - 1
LAST_UUID = "ffffffff-ffff-ffff-ffff-ffffffffffff"


def filter_columns(where: JobFilter, states: Sequence[str]) -> Bound:
    """$1 states, $2 queue, $3 name, $4 tenant, $5 created after, $6 created before (exclusive)."""
    return (
        list(states),
        where.queue,
        where.name,
        where.tenant,
        MIN_BIGINT if where.created_after_ms is None else where.created_after_ms,
        MAX_BIGINT if where.created_before_ms is None else where.created_before_ms,
    )


# -- listing.sql -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListParams:
    """`list_jobs`: $1..$6 the filter, $7 and $8 the position (created_at, id), $9 the limit."""

    where: JobFilter
    states: Sequence[str]
    after: JobPosition | None
    limit: int

    def bind(self) -> Bound:
        created, job_id = (
            (MAX_BIGINT, LAST_UUID)
            if self.after is None
            else (self.after.created_at_ms, self.after.id)
        )
        return (*filter_columns(self.where, self.states), created, job_id, self.limit)


@dataclass(frozen=True, slots=True)
class QueueCountsParams:
    """`queue_counts`: $1 now, $2 the cap of each count."""

    now_ms: int
    cap: int

    def bind(self) -> Bound:
        return (self.now_ms, self.cap)


# -- bulk.sql --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BulkParams:
    """`remove_many`: $1..$6 the filter, $7 now, $8 the batch limit, $9 the cap of `remaining`."""

    where: JobFilter
    states: Sequence[str]
    now_ms: int | None
    limit: int
    cap: int

    def bind(self) -> Bound:
        return (*filter_columns(self.where, self.states), self.now_ms, self.limit, self.cap)


@dataclass(frozen=True, slots=True)
class CancelManyParams:
    """`cancel_many`: the bulk shape ($1..$9), $10 the error each cancelled job stores."""

    bulk: BulkParams
    error: str

    def bind(self) -> Bound:
        return (*self.bulk.bind(), self.error)


@dataclass(frozen=True, slots=True)
class WakingBulkParams:
    """`promote_many`, `retry_many`: the bulk shape ($1..$9), $10 the wake channel."""

    bulk: BulkParams
    channel: str

    def bind(self) -> Bound:
        return (*self.bulk.bind(), self.channel)


# -- operator.sql ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromoteParams:
    """`promote`: $1 now, $2 job id, $3 the wake channel."""

    now_ms: int | None
    job_id: str
    channel: str

    def bind(self) -> Bound:
        return (self.now_ms, self.job_id, self.channel)


# -- ledger.sql ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CounterParams:
    """`counter_buckets`: $1 tier, $2 since."""

    tier: str
    since_ms: int

    def bind(self) -> Bound:
        return (self.tier, self.since_ms)


@dataclass(frozen=True, slots=True)
class RollupParams:
    """`rollup_counters`: $1 now, $2..$4 the minute, hour and day in ms (the contract's sizes)."""

    now_ms: int

    def bind(self) -> Bound:
        return (self.now_ms, MINUTE_MS, HOUR_MS, DAY_MS)


@dataclass(frozen=True, slots=True)
class PauseRowParams:
    """`pause`: $1 now, $2 kind, $3 name."""

    now_ms: int | None
    kind: str
    name: str

    def bind(self) -> Bound:
        return (self.now_ms, self.kind, self.name)


@dataclass(frozen=True, slots=True)
class ResumeParams:
    """`resume`: $1 kind, $2 name, $3 the wake channel."""

    kind: str
    name: str
    channel: str

    def bind(self) -> Bound:
        return (self.kind, self.name, self.channel)
