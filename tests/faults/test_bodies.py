"""Faults from the job body itself: it blocks its event loop past the lease (`time.sleep`), it
never returns, or it allocates until the worker cannot any more (an address-space limit).

Promised: a blocked worker's job is reclaimed and completes once; the blocked run's late settle
is fenced (one winning result). A body that never returns is cancelled by its `timeout=` and,
its attempts spent, dead-lettered — it never holds a slot for ever. A body that eats all memory
is retried (on whichever worker claims it) and buried once its attempts are spent, however each
attempt ended (a MemoryError, or the worker killed and the lease lapsing); the other jobs
complete, the fleet keeps serving.
"""

from __future__ import annotations

import asyncio
import time

import pytest

import xjobs

from .fault_app import JOBS, Hog, Work, forever, hog, work
from .harness import LEASE_S, Proc, Scene, until

ADDRESS_SPACE_HEADROOM = 256 << 20  # the body may map this much more than an idle worker


@pytest.mark.scenario("body blocks its event loop past the lease")
@pytest.mark.asyncio
async def test_a_body_blocking_its_event_loop_past_the_lease(scene: Scene) -> None:
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        blocker = await work.enqueue(Work(key="blocker", block_s=3 * LEASE_S))
        scene.ledger.acknowledge("blocker", blocker)
        first = scene.worker(concurrency=1)
        await scene.started(first)
        await until(lambda: scene.effects.count("start", key="blocker") > 0, what="the block")
        keys = [f"beside-{n}" for n in range(5)]
        scene.ledger.acknowledge_all(keys, await work.enqueue_many([Work(key=k) for k in keys]))
        await scene.started(scene.worker())
        # the blocked run wakes after its successor completed; its late settle must miss
        await until(lambda: scene.effects.count("effect", key="blocker") == 2, what="the wake-up")
        await until(lambda: stale(first), what="the blocked run's settle to be fenced")
        ledger = await scene.settle(app)
        record = await app.get_job(blocker.job_id)
    ledger.check()
    assert (record.state, record.attempt) == ("completed", 2), record


def stale(proc: Proc) -> list[str]:
    """The lines where a worker noticed its run had lost the job."""
    return proc.lines("jobs.settle.unowned") + proc.lines("jobs.lease.lost")


@pytest.mark.scenario("body never returns (job timeout)")
@pytest.mark.parametrize(
    "stubborn",
    [
        pytest.param(False, id="cancellable"),
        pytest.param(True, id="swallows-cancel"),
    ],
)  # fmt: skip
@pytest.mark.asyncio
async def test_a_body_that_never_returns_is_cut_by_its_timeout_then_dead_lettered(
    scene: Scene, stubborn: bool
) -> None:
    """A cancellable body is cut by `timeout=` and fails its attempts; one that swallows its
    cancellation cannot be stopped, so its lease lapses and the claim buries it on its final
    attempt. Either way it ends dead, the other jobs complete, and the worker still drains and
    exits 0 on SIGTERM."""
    if stubborn:
        scene.ledger.scenario = "body never returns and swallows its cancellation"
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        stuck = await forever.enqueue(Work(key="forever", stubborn=stubborn))
        scene.ledger.acknowledge("forever", stuck)
        scene.ledger.may_bury.add("forever")
        keys = [f"beside-{n}" for n in range(5)]
        scene.ledger.acknowledge_all(keys, await work.enqueue_many([Work(key=k) for k in keys]))
        worker = scene.worker(concurrency=3)
        await scene.started(worker)
        ledger = await scene.settle(app, bound_s=20)
        record = await app.get_job(stuck.job_id)
    code = await asyncio.to_thread(worker.stop, 8.0)  # drain-timeout 2 s, then exit
    ledger.check(buried=1)
    assert (record.state, record.attempt) == ("dead", 2), record
    if not stubborn:
        assert "XJOBS_TIMEOUT" in (record.last_error or ""), record.last_error
    assert code == 0, f"the worker did not drain on SIGTERM:\n{worker.text()[-3000:]}"


def idle_footprint(scene: Scene) -> tuple[int, int]:
    """The peak address space and the resident memory of an idle worker (bytes)."""
    probe = scene.worker()
    try:
        deadline = time.monotonic() + 30
        while not probe.lines("jobs.worker.started") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        return probe.memory_kb("VmPeak") * 1024, probe.memory_kb("VmRSS") * 1024
    finally:
        probe.stop()


@pytest.mark.scenario("memory pressure")
@pytest.mark.parametrize("killer", ["rlimit", "oom"])
@pytest.mark.asyncio
async def test_a_body_that_allocates_until_the_worker_cannot(scene: Scene, killer: str) -> None:
    """`rlimit`: the workers run under RLIMIT_AS (idle peak + 256 MiB); `oom`: the test plays
    the kernel's OOM killer and SIGKILLs a worker whose resident memory grows 256 MiB past idle."""
    scene.ledger.scenario = {
        "rlimit": "memory pressure: body allocates until RLIMIT_AS",
        "oom": "memory pressure: worker OOM-killed (SIGKILL at an RSS limit)",
    }[killer]
    idle_peak, idle_rss = await asyncio.to_thread(idle_footprint, scene)
    limit = idle_peak + ADDRESS_SPACE_HEADROOM if killer == "rlimit" else None
    rss_limit = idle_rss + ADDRESS_SPACE_HEADROOM if killer == "oom" else None
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        hungry = await hog.enqueue(Hog(key="hog"))
        scene.ledger.acknowledge("hog", hungry)
        scene.ledger.may_bury.add("hog")
        keys = [f"beside-{n}" for n in range(10)]
        scene.ledger.acknowledge_all(
            keys, await work.enqueue_many([Work(key=k, hold_s=0.3) for k in keys])
        )
        fleet = [scene.worker(limit_as=limit), scene.worker(limit_as=limit)]
        await scene.started(*fleet)
        guard = Guard(scene, fleet, limit, rss_limit)
        await guard.watch(app, hungry.job_id, within_s=30)
        # a worker the guard started again has its SIGTERM drain in place before the scene ends
        await scene.started(*(proc for proc in fleet if proc.alive))
        ledger = await scene.settle(app, bound_s=20)
        record = await app.get_job(hungry.job_id)
    print(
        f"\nlimit {(limit or rss_limit or 0) >> 20} MiB ({killer}); {guard.kills} OOM kills, "
        f"{guard.restarts} restarts; hog: {record.state} after {record.attempt} attempts, "
        f"{record.last_error!s:.100}"
    )
    ledger.check(buried=1)
    assert (record.state, record.attempt) == ("dead", 2), record
    if killer == "oom":
        assert guard.kills >= 1, "the hog never grew past the limit"


class Guard:
    """A process supervisor (a dead worker is started again) and, with `rss_limit`, the OOM
    killer (a worker whose resident memory passes the limit is SIGKILLed)."""

    def __init__(
        self, scene: Scene, fleet: list[Proc], limit_as: int | None, rss_limit: int | None
    ) -> None:
        self.scene = scene
        self.fleet = fleet
        self.limit_as = limit_as
        self.rss_limit = rss_limit
        self.kills = 0
        self.restarts = 0

    async def watch(self, app: xjobs.App, job_id: str, *, within_s: float) -> None:
        """Until the job is finished (or `within_s` passed)."""
        deadline = time.monotonic() + within_s
        checked = 0.0
        while time.monotonic() < deadline:
            for n, proc in enumerate(self.fleet):
                if self.rss_limit and proc.alive and proc.memory_kb() * 1024 > self.rss_limit:
                    self.scene.kill(proc)
                    self.kills += 1
                if not proc.alive:
                    self.scene.fault(f"{proc.name} died", time.time())
                    self.fleet[n] = self.scene.worker(limit_as=self.limit_as)
                    self.restarts += 1
            if time.monotonic() - checked > 0.3:
                checked = time.monotonic()
                if not (await app.get_job(job_id)).live:
                    return
            await asyncio.sleep(0.02)
