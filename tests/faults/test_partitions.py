"""Faults: partitions, not closed sockets, through the fault proxy (`proxy.py`): the database stalls
past the lease under a running body; the enqueuer is partitioned mid-commit; the Postgres wake
connection is black-holed while the pool still works.

Promised: a stalled worker declares its lease lost on time and cancels the run, a second worker
completes the job once, and the stalled worker's late writes are fenced out; an enqueue either
answers or is refused `XJOBS_BACKEND_UNAVAILABLE`, and an answered one always exists; with the
wake partitioned, jobs still start by the poll.
"""

from __future__ import annotations

import asyncio
import functools
import time

import pytest

import xjobs
from xjobs.contract.introspection import JobFilter
from xjobs.errors import BackendUnavailableError

from .fault_app import JOBS, Work, work
from .harness import Scene, Target, pg_worker_backends, until, until_async
from .proxy import FaultProxy

LEASE_S = 1.0
HOLD_S = 3.0  # longer than the lease: the stall strikes while the body runs
LOST_WITHIN_S = 3 * LEASE_S + 2.0  # generous: a whole lease window without a beat, then the log
ANSWER_DELAY_S = 0.5  # the server's answers are held this long: the commit lands, the answer not
CUT_AFTER_S = (0.1, 0.3, 0.6, 0.9)  # when the connections are cut: before, amid, after the commit
ROUNDS = 2
START_WITHIN_S = 15.0  # generous: the idle poll's ceiling while the wake is believed live is 5 s


@pytest.mark.scenario("the database stalls past the lease while a body runs")
@pytest.mark.asyncio
async def test_a_stall_past_the_lease_cancels_the_run_and_fences_its_late_writes(
    scene: Scene, target: Target
) -> None:
    with FaultProxy("127.0.0.1", target.port()) as proxy:
        async with xjobs.App(scene.url, jobs=JOBS) as app:
            scene.worker_url = proxy.url(scene.url)
            stalled = scene.worker(lease_s=LEASE_S, concurrency=1)
            await scene.started(stalled)
            result = await work.enqueue(Work(key="held", hold_s=HOLD_S))
            scene.ledger.acknowledge("held", result)
            await until(lambda: scene.effects.count("start", key="held") > 0, what="the run")
            async with scene.window("the database stalls for the first worker"):
                stall = time.time()
                proxy.set("stall")
                await until(
                    lambda: bool(stalled.lines("jobs.lease.lost")),
                    what="the stalled worker to declare its lease lost",
                    timeout_s=LOST_WITHIN_S,
                )
                lost_after_s = time.time() - stall
                scene.worker_url = scene.url
                second = scene.worker(lease_s=LEASE_S, concurrency=1)
                await until(
                    lambda: scene.effects.count("effect", key="held", pid=second.pid) > 0,
                    what="the second worker to complete the job",
                )
                proxy.set("pass")  # the first worker's held writes reach the server now
            await asyncio.sleep(2 * LEASE_S)
            record = await app.get_job(result.job_id)
            ledger = await scene.settle(app)
    print(f"\nlease declared lost {lost_after_s:.2f} s after the stall began")
    assert (record.state, record.attempt) == ("completed", 2), record
    assert scene.effects.count("effect", key="held", pid=stalled.pid) == 0, "the run went on"
    ledger.check(duplicated=0)


@pytest.mark.scenario("the enqueuer is partitioned mid-commit")
@pytest.mark.asyncio
async def test_an_enqueue_cut_mid_commit_is_refused_as_unavailable_or_exists(
    scene: Scene, target: Target
) -> None:
    refused: list[str] = []
    with FaultProxy("127.0.0.1", target.port()) as proxy:
        async with xjobs.App(proxy.url(scene.url), jobs=JOBS) as app:
            scene.ledger.acknowledge("warm", await app.enqueue(work, Work(key="warm")))
            for n in range(ROUNDS):
                for cut_after_s in CUT_AFTER_S:
                    key = f"cut-{n}-{cut_after_s}"
                    proxy.set("delay", delay_s=ANSWER_DELAY_S, direction="to_client")
                    sent = asyncio.create_task(app.enqueue(work, Work(key=key)))
                    await asyncio.sleep(cut_after_s)
                    async with scene.window("the enqueuer's connections cut mid-commit"):
                        proxy.cut()
                        proxy.set("pass")
                    try:
                        scene.ledger.acknowledge(key, await sent)
                    except BackendUnavailableError:
                        refused.append(key)
    # every acknowledged enqueue is read back through a direct connection, and runs
    async with xjobs.App(scene.url, jobs=JOBS) as direct:
        page = await direct.operator.list_jobs(JobFilter(name=work.name), limit=100)
        stored = {(await direct.get_job(s.id)).idempotency_key for s in page.jobs}
        await scene.started(scene.worker())
        ledger = await scene.settle(direct)
    committed = len(stored & set(refused))
    print(f"\n{len(refused)} refused as unavailable ({committed} of them had committed)")
    assert set(scene.ledger.acked.values()) <= stored, "an acknowledged enqueue is not stored"
    ledger.check(duplicated=0)


@pytest.mark.scenario("the wake connection is partitioned, the poll still works")
@pytest.mark.parametrize("target", ["postgres"], indirect=True)
@pytest.mark.asyncio
async def test_jobs_start_by_the_poll_while_the_wake_is_partitioned(
    scene: Scene, target: Target
) -> None:
    with FaultProxy("127.0.0.1", target.port()) as proxy:
        async with xjobs.App(scene.url, jobs=JOBS) as app:
            scene.worker_url = proxy.url(scene.url)
            worker = scene.worker()
            await scene.started(worker)

            async def listening() -> bool:
                return bool(await pg_worker_backends(scene.url, listening=True))

            await until_async(listening, what="the worker's LISTEN session", timeout_s=10)
            assert proxy.open_links(only=b"LISTEN") == 1, "the wake connection is not the proxy's"
            async with scene.window("the wake connection black-holed"):
                proxy.set("drop", only=b"LISTEN")
                keys = [f"polled-{i}" for i in range(5)]
                for key in keys:
                    scene.ledger.acknowledge(key, await work.enqueue(Work(key=key)))
                    await asyncio.sleep(0.5)
                for key in keys:
                    await until(
                        functools.partial(scene.effects.count, "start", key=key),
                        what=f"{key} to start by the poll",
                        timeout_s=START_WITHIN_S,
                    )
                proxy.set("pass")
            ledger = await scene.settle(app)
    ledger.check(duplicated=0)
