"""Child jobs on what only SQLite has: the in-place upgrade of an older file, and several worker
PROCESSES settling the children of one parent on one file (each process its own writer)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from xjobs.clock import SystemClock
from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import WAIT_FOREVER_MS, ClaimOptions
from xjobs.run.child_rows import child_id
from xjobs.run.settle import parking
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend
from xjobs_sqlite.install import SCHEMA_VERSION
from xjobs_sqlite.testing import file_url

PROCESSES = 4
CHILDREN = 320
PAGE = 200  # two spawn pages: the second resumes at index 200

# Each worker process claims children and the parent, settles each child (completed with a
# result, or through ack_many), records what it ran, and stops once the parent is completed.
WORKER = """
import asyncio, json, sys
from xjobs.contract.driver import ClaimOptions
from xjobs_sqlite.backend import open_backend

async def main(url, name, parent_id):
    backend = await open_backend(url)
    ran = []
    try:
        while True:
            claimed = await backend.jobs.claim(
                ClaimOptions(name, {"kids": 7, "parents": 1}, lease_ms=600_000))
            kids = [job for job in claimed.jobs if job.queue == "kids"]
            for job in claimed.jobs:
                if job.queue == "parents":
                    assert await backend.jobs.complete(job.claim, '"continued"')
                    ran.append(job.id)
            singles, batch = kids[:2], kids[2:]
            for job in singles:
                if await backend.jobs.complete(job.claim, json.dumps(job.id)):
                    ran.append(job.id)
            landed = await backend.jobs.ack_many([job.claim for job in batch])
            ran += [job.id for job, ok in zip(batch, landed) if ok]
            if not claimed.jobs:
                parent = await backend.jobs.get(parent_id)
                if parent.state == "completed":
                    break
                await asyncio.sleep(0.01)
    finally:
        await backend.close()
    print(json.dumps(ran))

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""


async def _spawn_and_park(url: str) -> tuple[str, str, list[str]]:
    """A parent claimed, its children spawned in two pages, the parent parked on them."""
    backend = await open_backend(url, clock=SystemClock())
    try:
        store = backend.children
        assert store is not None
        await backend.jobs.enqueue([new_job(queue="parents")])
        claimed = await backend.jobs.claim(ClaimOptions("main", {"parents": 1}, lease_ms=60_000))
        (parent,) = claimed.jobs
        group = ChildGroup(parent.id, parent.run_id, "parents", "fan", CHILDREN, True, True)
        ids = [child_id(parent.run_id, "fan", i) for i in range(CHILDREN)]
        rows = [new_job(id=i, queue="kids", idempotency_key=f"child:{i}") for i in ids]
        assert await store.spawn(parent.claim, group, 0, rows[:PAGE]) == PAGE
        assert await store.spawn(parent.claim, group, PAGE, rows[PAGE:]) == CHILDREN
        assert await store.park(parent.claim, parent.run_id, "fan", parking(WAIT_FOREVER_MS))
        return parent.id, parent.run_id, ids
    finally:
        await backend.close()


def test_worker_processes_settle_every_child_once_and_continue_the_parent_once(
    db_url: str,
) -> None:
    parent_id, run_id, ids = asyncio.run(_spawn_and_park(db_url))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, db_url, f"w-{i}", parent_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), [err for _, err in outputs]
    ran = [job_id for out, _ in outputs for job_id in json.loads(out)]
    assert sorted(ran) == sorted([*ids, parent_id])  # every child once, the parent once

    async def check() -> None:
        backend = await open_backend(db_url)
        try:
            store = backend.children
            assert store is not None
            state = await store.group(run_id, "fan")
            assert state is not None
            assert (state.total, state.spawned, state.ended, state.failed) == (
                CHILDREN,
                CHILDREN,
                CHILDREN,
                0,
            )
            assert state.resolved
            family = await store.family(parent_id)
            assert family is not None
            assert family.children == {"completed": CHILDREN}
            page = await store.children_page(run_id, "fan", 9, 3)
            assert [(row.index, row.job_id, row.state) for row in page] == [
                (i, ids[i], "completed") for i in (10, 11, 12)
            ]
        finally:
            await backend.close()

    asyncio.run(check())


def _version_9_file(path: Path) -> None:
    """A file as the schema before child jobs left it: installed, then the child link taken away."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("drop table child_groups")
        conn.execute("drop index jobs_child_groups")
        conn.execute("drop index jobs_child_parents")
        for column in (
            "parent_id",
            "parent_run_id",
            "child_step",
            "child_index",
            "detached",
            "child_counted",
        ):
            conn.execute(f"alter table jobs drop column {column}")
        conn.execute("update schema_version set version = 9")
    finally:
        conn.close()


def test_a_file_of_the_schema_before_children_is_upgraded_in_place(tmp_path: Path) -> None:
    url = file_url(tmp_path / "old.db")

    async def seed() -> str:
        backend = await open_backend(url)
        try:
            (done,) = await backend.jobs.enqueue([new_job(queue="q")])
            return done.job_id
        finally:
            await backend.close()

    old_job = asyncio.run(seed())
    _version_9_file(tmp_path / "old.db")

    async def reopen() -> None:
        backend = await open_backend(url)
        try:
            store = backend.children
            assert store is not None
            assert await backend.jobs.get(old_job) is not None  # the old rows kept
            family = await store.family(old_job)
            assert family is not None
            assert (family.parent_id, dict(family.children)) == (None, {})
            claimed = await backend.jobs.claim(ClaimOptions("w", {"q": 1}, lease_ms=60_000))
            (parent,) = claimed.jobs
            group = ChildGroup(parent.id, parent.run_id, "q", "one", 1, True, True)
            kid = new_job(id=child_id(parent.run_id, "one", 0), queue="q")
            assert await store.spawn(parent.claim, group, 0, [kid]) == 1
            assert await store.group(parent.run_id, "one") is not None
        finally:
            await backend.close()

    asyncio.run(reopen())
    conn = sqlite3.connect(tmp_path / "old.db")
    try:
        (version,) = conn.execute("select version from schema_version").fetchone()
        assert version == SCHEMA_VERSION
    finally:
        conn.close()
