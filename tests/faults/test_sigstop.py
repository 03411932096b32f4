"""Faults: SIGSTOP — a worker frozen past its lease, then SIGCONT; the database server frozen for
several lease windows.

Promised: a frozen worker's jobs are reclaimed once their lease lapses and complete elsewhere;
when it wakes, its stale settles are fenced (each job ends with ONE result: completed, on the
attempt that won); a frozen database loses nothing and the fleet resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest

import xjobs

from .fault_app import JOBS, Work, work
from .harness import LEASE_S, Scene, Target, until

FROZEN_S = 3 * LEASE_S


@pytest.mark.scenario("SIGSTOP worker past its lease, then SIGCONT")
@pytest.mark.asyncio
async def test_a_worker_frozen_past_its_lease_is_fenced_when_it_wakes(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"frozen-{n}" for n in range(12)]
        results = await work.enqueue_many([Work(key=k, hold_s=1.5) for k in keys])
        scene.ledger.acknowledge_all(keys, results)
        first, second = scene.worker(concurrency=3), scene.worker(concurrency=3)
        await scene.started(first, second)
        await until(lambda: len(scene.effects.running_in(first.pid)) >= 2, what="runs on the first")
        async with scene.window("SIGSTOP worker"):
            first.pause()
            held = scene.effects.running_in(first.pid)  # frozen before their effect
            await asyncio.sleep(FROZEN_S)
            first.resume()
        ledger = await scene.settle(app)
        await asyncio.sleep(1.0)  # the woken worker's stale settles land (or miss) now
        ids = {key: r.job_id for key, r in zip(keys, results, strict=True)}
        records = {key: await app.get_job(ids[key]) for key in held}
    ledger.check()
    for key, record in records.items():
        assert record.state == "completed", f"{key}: {record.state}"
        assert record.attempt >= 2, f"{key} was not reclaimed while its worker was frozen"
    stale = first.lines("jobs.settle.unowned") + first.lines("jobs.lease.lost")
    assert stale, f"the woken worker's stale runs were not fenced:\n{first.text()[-3000:]}"


@pytest.mark.scenario("SIGSTOP database server for several leases")
@pytest.mark.asyncio
async def test_the_database_frozen_for_several_lease_windows(scene: Scene, target: Target) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"db-frozen-{n}" for n in range(20)]
        scene.ledger.acknowledge_all(
            keys, await work.enqueue_many([Work(key=k, hold_s=1.0) for k in keys])
        )
        await scene.started(scene.worker(), scene.worker())
        await until(lambda: scene.effects.count("start") >= 4, what="runs in flight")
        pids = await target.server_pids()
        try:
            async with scene.window("SIGSTOP database server"):
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):  # a backend that just ended
                        os.kill(pid, signal.SIGSTOP)
                await asyncio.sleep(FROZEN_S)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        after = [f"db-after-{n}" for n in range(5)]
        scene.ledger.acknowledge_all(after, await work.enqueue_many([Work(key=k) for k in after]))
        ledger = await scene.settle(app)
    ledger.check()
