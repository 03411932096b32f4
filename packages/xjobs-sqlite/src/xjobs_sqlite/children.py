"""`SqliteChildren`: child jobs over `sql/children.sql` (the spawn of a page, the park, the pages,
the fail-fast cancel), each one write transaction fenced on the parent's claim."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from xjobs.contract.backend import WakeSource
from xjobs.contract.children import ChildGroup, ChildRow, Family, GroupState
from xjobs.contract.driver import Claim, JobState, Nack, NewJob
from xjobs_sqlite import moves, settle
from xjobs_sqlite.children_endings import take_woken, woken
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.enqueue import enqueue_rows
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql

SIBLING_FAILED = "sibling failed"
"""The cancel reason of a child a fail-fast parent cancels (`last_error` "cancelled: sibling failed")."""


def _fenced(conn: Connection, claim: Claim) -> bool:
    fence = {"job_id": claim.job_id, "worker_id": claim.worker_id, "claims": claim.claims}
    return conn.execute(sql("child_fence"), fence).fetchone() is not None


def _spawn(
    conn: Connection,
    claim: Claim,
    group: ChildGroup,
    first_index: int,
    rows: Sequence[NewJob],
    now: int,
) -> tuple[int | None, frozenset[str]]:
    if not _fenced(conn, claim):
        return None, frozenset()
    key = {"parent_run_id": group.parent_run_id, "step": group.step}
    conn.execute(
        sql("child_group_put"),
        {
            **key,
            "parent_id": group.parent_id,
            "total": group.total,
            "wait": int(group.wait),
            "fail_fast": int(group.fail_fast),
            "detached": int(group.detached),
            "now": now,
        },
    )
    done = enqueue_rows(conn, rows, now)
    links = json.dumps([[row.id, first_index + i] for i, row in enumerate(rows)])
    conn.execute(
        sql("child_link"),
        {**key, "parent_id": group.parent_id, "detached": int(group.detached), "rows": links},
    )
    spawned = first_index + len(rows)
    (count,) = conn.execute(sql("child_spawned"), {**key, "spawned": spawned}).fetchone()
    return int(count), done.due_queues


def _park(
    conn: Connection, claim: Claim, parent_run_id: str, step: str, nack: Nack, now: int
) -> bool:
    if not _fenced(conn, claim):
        return False
    key = {"parent_run_id": parent_run_id, "step": step}
    row = conn.execute(sql("child_park"), key).fetchone()
    if row is not None and row[0]:
        nack = replace(nack, run_at_ms=now)  # the children ended before the park: due now
        if claim.queue is not None:
            woken(claim.queue)
    return settle.nack(conn, claim, nack, now)


def _cancel_children(
    conn: Connection, claim: Claim, parent_run_id: str, step: str, now: int
) -> int | None:
    if not _fenced(conn, claim):
        return None
    key = {"parent_run_id": parent_run_id, "step": step}
    live = [str(row[0]) for row in conn.execute(sql("child_group_live"), key).fetchall()]
    return sum(moves.cancel_tree(conn, job_id, SIBLING_FAILED, now) for job_id in live)


def _family(conn: Connection, job_id: str) -> Family | None:
    rows = conn.execute(sql("child_family"), {"id": job_id}).fetchall()
    if not rows:
        return None
    parent = rows[0][0]
    counts = {str(state): int(n) for _, state, n in rows if state is not None}
    return Family(parent_id=None if parent is None else str(parent), children=counts)


class SqliteChildren:
    """Groups of children keyed by (parent run, step) in `child_groups`, the links on `jobs`."""

    def __init__(self, executor: Executor, wake: WakeSource) -> None:
        self._x = executor
        self._wake = wake

    def _emit(self, queues: set[str] | frozenset[str]) -> None:
        for queue in sorted(queues):
            self._wake.emit(queue)

    async def spawn(
        self, claim: Claim, group: ChildGroup, first_index: int, rows: Sequence[NewJob]
    ) -> int | None:
        now = self._x.now()
        spawned, due = await self._x.write(
            lambda conn: _spawn(conn, claim, group, first_index, rows, now)
        )
        self._emit(due)
        return spawned

    async def group(self, parent_run_id: str, step: str) -> GroupState | None:
        key = {"parent_run_id": parent_run_id, "step": step}
        row = await self._x.read(lambda conn: conn.execute(sql("child_group"), key).fetchone())
        if row is None:
            return None
        total, spawned, ended, failed, first_failed, resolved = row[:6]
        return GroupState(
            total=int(total),
            spawned=int(spawned),
            ended=int(ended),
            failed=int(failed),
            first_failed=None if first_failed is None else int(first_failed),
            resolved=bool(resolved),
        )

    async def park(self, claim: Claim, parent_run_id: str, step: str, nack: Nack) -> bool:
        now = self._x.now()
        parked, queues = await self._x.write(
            lambda conn: (_park(conn, claim, parent_run_id, step, nack, now), take_woken())
        )
        self._emit(queues)
        return parked

    async def children_page(
        self, parent_run_id: str, step: str, after_index: int, limit: int
    ) -> list[ChildRow]:
        params = {
            "parent_run_id": parent_run_id,
            "step": step,
            "after_index": after_index,
            "limit": limit,
        }
        rows = await self._x.read(lambda conn: conn.execute(sql("child_page"), params).fetchall())
        return [
            ChildRow(
                index=int(index),
                job_id=str(job_id),
                state=cast(JobState, state),
                result=result,
                last_error=last_error,
            )
            for index, job_id, state, result, last_error in rows
        ]

    async def cancel_children(self, claim: Claim, parent_run_id: str, step: str) -> int | None:
        now = self._x.now()
        moved, queues = await self._x.write(
            lambda conn: (_cancel_children(conn, claim, parent_run_id, step, now), take_woken())
        )
        self._emit(queues)
        return moved

    async def family(self, job_id: str) -> Family | None:
        return await self._x.read(lambda conn: _family(conn, job_id))
