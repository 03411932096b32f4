"""The resolution rule of child groups, run inside each terminal write's transaction (a child's first
ending counted into its group, the group resolved once, a parked parent made due), and its schema."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

from xjobs_sqlite.connection import Connection
from xjobs_sqlite.sql import read_sql, split_statements, sql

_pending = threading.local()  # each writer thread's parent queues made due, until its write ends


def upgrade(conn: Connection) -> None:
    """Add the child link, its indexes and `child_groups` to a file that lacks them (in place)."""
    columns = {str(row[1]) for row in conn.execute("pragma table_info(jobs)")}
    if "parent_id" in columns:
        return
    for statement in split_statements(read_sql("children_upgrade.sql")):
        conn.execute(statement)


def ended(conn: Connection, job_ids: Iterable[str], now: int) -> None:
    """Count the first ending of each child among `job_ids` (each just written terminal in this
    transaction) into its group; the ending that resolves a waiting group makes its parked parent
    due now. SQLite has one writer at a time: the group row read here cannot move before the
    update that follows it, so one counter row serves every ending of a group."""
    ids = json.dumps(list(job_ids))
    for run_id, step, index, state in conn.execute(sql("child_endings"), {"ids": ids}).fetchall():
        key = {"parent_run_id": run_id, "step": step}
        group = conn.execute(sql("child_group"), key).fetchone()
        if group is None:
            continue
        total, _, done, failed, _, resolved, wait, fail_fast, parked, parent_id = group
        failure = 0 if state == "completed" else 1
        resolves = bool(
            wait and not resolved and (done + 1 >= total or (fail_fast and failed + failure > 0))
        )
        conn.execute(
            sql("child_group_ended"),
            {**key, "failed": failure, "child_index": index, "resolved": int(resolved or resolves)},
        )
        if resolves and parked:
            row = conn.execute(
                sql("child_wake_parent"),
                {"parent_id": parent_id, "parent_run_id": run_id, "now": now},
            ).fetchone()
            if row is not None:
                woken(str(row[0]))


def descendants(conn: Connection, job_id: str) -> list[str]:
    """The live descendants a cancel of `job_id` takes along (none behind a detached child)."""
    return [str(row[0]) for row in conn.execute(sql("child_descendants"), {"id": job_id})]


def woken(queue: str) -> None:
    """Note a queue whose parked parent this thread's write made due."""
    queues: set[str] = getattr(_pending, "queues", set())
    queues.add(queue)
    _pending.queues = queues


def take_woken() -> set[str]:
    """The queues this thread's writes made a parent due in since the last take (to wake them)."""
    queues: set[str] = getattr(_pending, "queues", set())
    _pending.queues = set()
    return queues
