"""`xjobs workers list`: the live worker rows, each with the jobs it runs now."""

from __future__ import annotations

from typing import TYPE_CHECKING

import xjobs
from xjobs.contract.driver import ClaimOptions
from xjobs.contract.stores import WorkerInfo

if TYPE_CHECKING:
    from conftest import Ops

WORKER = "5f0c1e7a-3b7e-4e5c-9d3b-1a2b3c4d5e6f"


def _a_worker_holding_one_job(ops: Ops) -> str:
    (job_id,) = ops.enqueue("charge", "c1")

    async def claim(app: xjobs.App) -> None:
        now = app.clock.now_ms()
        assert app.backend.workers is not None
        info = WorkerInfo(WORKER, "host-a", 4242, ("billing",), now - 60_000, now)
        await app.backend.workers.announce(info, 60_000)
        await app.backend.jobs.claim(
            ClaimOptions(worker_id=WORKER, queues={"billing": 1}, lease_ms=60_000)
        )

    ops.run(claim)
    return job_id


def test_workers_list_shows_each_live_worker_and_its_running_jobs(ops: Ops) -> None:
    job_id = _a_worker_holding_one_job(ops)

    result = ops.cli("workers list", url=True)

    assert result.code == 0
    doc = result.doc
    assert (doc["version"], doc["kind"]) == (1, "workers.list")
    (worker,) = doc["workers"]
    assert {k: worker[k] for k in ("id", "host", "pid", "queues", "running")} == {
        "id": WORKER,
        "host": "host-a",
        "pid": 4242,
        "queues": ["billing"],
        "running": [job_id],
    }
    assert worker["started_at_ms"] <= worker["last_seen_ms"] <= doc["now_ms"]


def test_workers_list_as_a_table(memory_ops: Ops) -> None:
    job_id = _a_worker_holding_one_job(memory_ops)

    out = memory_ops.cli("workers list", json=False).out.splitlines()

    assert out[0].split() == ["ID", "HOST", "PID", "QUEUES", "STARTED", "LAST", "SEEN", "RUNNING"]
    assert out[1].split()[:4] == [WORKER, "host-a", "4242", "billing"]
    assert out[-1] == f"  {WORKER}: {job_id}"


def test_no_worker_says_so(memory_ops: Ops) -> None:
    result = memory_ops.cli("workers list", json=False)

    assert (result.code, result.out) == (0, "no live worker\n")
