"""Several processes writing one file at once: no "database is locked" ever escapes, nothing is run twice.

Each process enqueues, claims and acks in a tight loop with the driver's busy retries turned off
(`busy_retries=0`), so a lock that SQLite answers at once instead of waiting for it (a deferred
transaction upgraded to a write) would surface in the process as an error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from xjobs.clock import SystemClock
from xjobs.contract.driver import BatchAck, ClaimOptions
from xjobs_sqlite.backend import open_backend

PROCESSES = 4
ROUNDS = 150

HAMMER = """
import asyncio, json, sys
from xjobs.contract.driver import ClaimOptions
from xjobs.testing.rows import new_job
from xjobs_sqlite.backend import open_backend

async def main(url, name, rounds):
    backend = await open_backend(url, busy_retries=0)
    acked = []
    try:
        for _ in range(rounds):
            await backend.jobs.enqueue([new_job(queue="q")])
            claimed = await backend.jobs.claim(ClaimOptions(name, {"q": 3}, lease_ms=600_000))
            landed = await backend.jobs.ack_many([job.claim for job in claimed.jobs])
            acked += [job.id for job, ok in zip(claimed.jobs, landed) if ok]
    finally:
        await backend.close()
    print(json.dumps(acked))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def _drain(url: str) -> list[str]:
    backend = await open_backend(url, clock=SystemClock())
    try:
        claimed = await backend.jobs.claim(ClaimOptions("drain", {"q": 10_000}, lease_ms=60_000))
        assert isinstance(backend.jobs, BatchAck)
        landed = await backend.jobs.ack_many([job.claim for job in claimed.jobs])
        return [job.id for job, ok in zip(claimed.jobs, landed, strict=True) if ok]
    finally:
        await backend.close()


def test_processes_writing_one_file_at_once_never_see_database_is_locked(db_url: str) -> None:
    asyncio.run(_drain(db_url))  # the schema, before the processes race to create it
    hammers = [
        subprocess.Popen(
            [sys.executable, "-c", HAMMER, db_url, f"w-{i}", str(ROUNDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    outputs = [hammer.communicate(timeout=120) for hammer in hammers]
    errors = [err for _, err in outputs if "locked" in err or "Traceback" in err]
    assert not errors, errors[0]
    assert all(hammer.returncode == 0 for hammer in hammers)
    acked = [job_id for out, _ in outputs for job_id in json.loads(out)]
    acked += asyncio.run(_drain(db_url))
    assert len(acked) == PROCESSES * ROUNDS
    assert len(set(acked)) == len(acked)


def test_a_process_that_never_closes_its_backend_still_exits(db_url: str) -> None:
    script = HAMMER.replace("await backend.close()", "pass")
    done = subprocess.run(
        [sys.executable, "-c", script, db_url, "w", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
