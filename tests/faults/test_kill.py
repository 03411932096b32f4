"""Faults: `kill -9` of a worker mid-run, mid-step and mid-settle, and of a relay between publish and mark.

Promised: nothing acknowledged is lost or stuck; a job whose worker died is claimable again once
its lease lapses and completes on another worker; a body runs twice only when the kill fell
between its effect and its settle (explained duplicates); a recorded step is never re-run.
"""

from __future__ import annotations

import json

import asyncpg
import pytest

import xjobs
from xjobs.contract.stores import OutboxStore
from xjobs_pg.backend import asyncpg_dsn

from .fault_app import JOBS, Flow, Work, work, workflow
from .harness import Scene, until, until_async


@pytest.mark.scenario("kill -9 worker mid-run")
@pytest.mark.asyncio
async def test_kill_9_of_a_worker_mid_run(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"run-{n}" for n in range(20)]
        results = await work.enqueue_many([Work(key=k, hold_s=1.0) for k in keys])
        scene.ledger.acknowledge_all(keys, results)
        first, second = scene.worker(), scene.worker()
        await scene.started(first, second)
        await until(lambda: len(scene.effects.running_in(first.pid)) >= 2, what="runs on the first")
        scene.kill(first)
        await scene.started(scene.worker())  # a supervisor brings one back
        ledger = await scene.settle(app)
    ledger.check()


@pytest.mark.scenario("kill -9 worker mid-step")
@pytest.mark.asyncio
async def test_kill_9_of_a_worker_mid_step_reruns_no_recorded_step(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"flow-{n}" for n in range(3)]
        results = await workflow.enqueue_many([Flow(key=k) for k in keys])
        scene.ledger.acknowledge_all(keys, results)
        first = scene.worker()
        await scene.started(first)
        for result in results:
            await scene.marked(f"in-three-{result.job_id}")
        scene.kill(first)
        await scene.started(scene.worker())
        ledger = await scene.settle(app)
        attempts = {
            key: (await app.get_job(r.job_id)).attempt for key, r in zip(keys, results, strict=True)
        }
    ledger.check(duplicated=0)
    for key in keys:
        steps = [r["step"] for r in scene.effects.rows("step") if r["key"] == key]
        assert sorted(steps) == ["one", "three", "two"], f"{key}: steps ran {steps}"
        assert scene.effects.count("step-start", key=key) == 2  # three: cut once, run once
        assert attempts[key] == 2


@pytest.mark.scenario("kill -9 worker mid-settle")
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.asyncio
async def test_kill_9_of_a_worker_mid_settle(scene: Scene, when: str) -> None:
    """`before`: the ack never reached the store (the body runs again: an explained duplicate);
    `after`: the ack landed and the worker died before it knew (the job stays completed)."""
    scene.ledger.scenario = f"kill -9 worker mid-settle ({when} the ack lands)"
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"settle-{n}" for n in range(5)]
        results = await work.enqueue_many([Work(key=k) for k in keys])
        scene.ledger.acknowledge_all(keys, results)
        target = results[0].job_id
        first = scene.worker(concurrency=1, XJOBS_FAULT_SETTLE=f"{when}:{target}")
        await scene.started(first)
        await scene.marked(f"settle-{target}")
        scene.kill(first)
        await scene.started(scene.worker())
        ledger = await scene.settle(app)
        record = await app.get_job(target)
    ledger.check()
    runs = scene.effects.count("effect", key=keys[0])
    if when == "before":
        assert (record.state, record.attempt, runs) == ("completed", 2, 2)
        assert ledger.duplicated >= 1
    else:
        assert (record.state, record.attempt, runs) == ("completed", 1, 1)


@pytest.mark.scenario("kill -9 relay between publish and mark")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_kill_9_of_a_relay_between_publish_and_mark(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        keys = [f"staged-{n}" for n in range(25)]
        conn = await asyncpg.connect(asyncpg_dsn(scene.url)[0])
        try:
            async with conn.transaction():
                staged = await work.stage_many(conn, [Work(key=k) for k in keys])
        finally:
            await conn.close()
        scene.ledger.acknowledge_all(keys, staged)  # the staging transaction committed
        first = scene.relay(XJOBS_FAULT_CRASH_AFTER_PUBLISH="1")
        await scene.started(first)
        published = json.loads(await scene.marked("published"))
        scene.kill(first)
        assert 0 < len(published) < len(keys)
        second = scene.relay()
        worker = scene.worker()
        await scene.started(second, worker)
        ledger = await scene.settle(app, staged=True)
        outbox = app.outbox_backend.outbox
        assert outbox is not None
        # the dead relay's rows ran already (its publish landed); the second relay marks them
        # once their 1 s lease lapses, which may be after the last of them settled
        await until_async(
            lambda: _none_pending(outbox), what="the dead relay's rows marked by the second"
        )
    code = second.stop()
    ledger.check(duplicated=0)
    assert code == 0
    stopped = second.lines("relay stopped:")
    assert stopped, second.text()[-2000:]
    assert "lost=0" in stopped[0], second.text()[-2000:]
    assert not second.lines("jobs.relay.pass-failed"), second.text()[-2000:]


async def _none_pending(outbox: OutboxStore) -> bool:
    """Whether every staged row of the outbox is marked published."""
    return await outbox.pending() == 0
