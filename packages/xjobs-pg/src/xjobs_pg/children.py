"""`PostgresChildren`: child jobs over `sql/children.sql` (groups, shards, the park, the pages), each
operation one statement; the group's resolution is written by the driver's terminal statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xjobs.contract.children import ChildGroup, ChildRow, Family, GroupState
from xjobs.contract.driver import Claim, JobState, Nack, NewJob
from xjobs_pg.driver import is_uuid
from xjobs_pg.executor import Executor
from xjobs_pg.params import Bound, One, fence, job_arrays
from xjobs_pg.wake_slots import WakeSlots

SIBLING_FAILED = "cancelled: sibling failed"
"""The `last_error` of a child a fail-fast parent cancels (and of its descendants)."""


@dataclass(frozen=True, slots=True)
class SpawnParams:
    """`spawn_children`: $1 now, $2..$4 the parent's claim, $5 parent run id, $6 step, $7 total,
    $8 wait, $9 fail fast, $10 detached, $11 first index, $12..$24 the rows as arrays, $25 the
    queues to wake, $26 the channel."""

    now_ms: int | None
    claim: Claim
    group: ChildGroup
    first_index: int
    rows: Sequence[NewJob]
    wake: list[str]
    channel: str

    def bind(self) -> Bound:
        g = self.group
        return (
            self.now_ms,
            *fence(self.claim),
            g.parent_run_id,
            g.step,
            g.total,
            g.wait,
            g.fail_fast,
            g.detached,
            self.first_index,
            *job_arrays(self.rows),
            self.wake,
            self.channel,
        )


@dataclass(frozen=True, slots=True)
class GroupKey:
    """`child_group`: $1 parent run id, $2 step."""

    parent_run_id: str
    step: str

    def bind(self) -> Bound:
        return (self.parent_run_id, self.step)


@dataclass(frozen=True, slots=True)
class ParkParams:
    """`park_children`: $1 now, $2..$4 the claim, $5 the next state, $6 run_at, $7 one when the
    attempt is handed back, $8 parent run id, $9 step."""

    now_ms: int | None
    claim: Claim
    nack: Nack
    parent_run_id: str
    step: str

    def bind(self) -> Bound:
        n = self.nack
        return (
            self.now_ms,
            *fence(self.claim),
            n.state,
            n.run_at_ms,
            0 if n.counts_as_attempt else 1,
            self.parent_run_id,
            self.step,
        )


@dataclass(frozen=True, slots=True)
class PageParams:
    """`child_page`: $1 parent run id, $2 step, $3 the index after which it starts, $4 its size."""

    parent_run_id: str
    step: str
    after_index: int
    limit: int

    def bind(self) -> Bound:
        return (self.parent_run_id, self.step, self.after_index, self.limit)


@dataclass(frozen=True, slots=True)
class CancelChildrenParams:
    """`cancel_children`: $1 now, $2 parent run id, $3 the error, $4..$6 the parent's claim, $7 step."""

    now_ms: int | None
    claim: Claim
    parent_run_id: str
    step: str

    def bind(self) -> Bound:
        return (self.now_ms, self.parent_run_id, SIBLING_FAILED, *fence(self.claim), self.step)


class PostgresChildren:
    """Groups of children keyed by (parent run, step); writes fenced on the parent's claim."""

    def __init__(self, executor: Executor, wake: WakeSlots) -> None:
        self._x = executor
        self._wake = wake

    async def spawn(
        self, claim: Claim, group: ChildGroup, first_index: int, rows: Sequence[NewJob]
    ) -> int | None:
        wake = self._wake.take(sorted({r.queue for r in rows if r.run_at_ms is None}))
        params = SpawnParams(
            self._x.now(), claim, group, first_index, rows, wake, self._wake.channel
        )
        row = await self._x.fetchrow("spawn_children", params)
        if row is None or not row["fenced"]:
            return None
        return int(row["spawned"])

    async def group(self, parent_run_id: str, step: str) -> GroupState | None:
        if not is_uuid(parent_run_id):
            return None
        row = await self._x.fetchrow("child_group", GroupKey(parent_run_id, step))
        if row is None:
            return None
        return GroupState(
            total=row["total"],
            spawned=row["spawned"],
            ended=row["ended"],
            failed=row["failed"],
            first_failed=row["first_failed"],
            resolved=row["resolved"],
        )

    async def park(self, claim: Claim, parent_run_id: str, step: str, nack: Nack) -> bool:
        params = ParkParams(self._x.now(), claim, nack, parent_run_id, step)
        return await self._x.landed("park_children", params)

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        if not is_uuid(parent_run_id):
            return []
        rows = await self._x.fetch(
            "child_page", PageParams(parent_run_id, step, after_index, limit)
        )
        return [
            ChildRow(
                index=row["child_index"],
                job_id=str(row["id"]),
                state=cast(JobState, row["state"]),
                result=row["result"],
                last_error=row["last_error"],
            )
            for row in rows
        ]

    async def cancel_children(self, claim: Claim, parent_run_id: str, step: str) -> int | None:
        params = CancelChildrenParams(self._x.now(), claim, parent_run_id, step)
        row = await self._x.fetchrow("cancel_children", params)
        if row is None or not row["fenced"]:
            return None
        return int(row["moved"])

    async def family(self, job_id: str) -> Family | None:
        if not is_uuid(job_id):
            return None
        rows = await self._x.fetch("family", One(job_id))
        if not rows:
            return None
        parent = rows[0]["parent_id"]
        counts = {row["state"]: int(row["count"]) for row in rows if row["state"] is not None}
        return Family(parent_id=None if parent is None else str(parent), children=counts)
