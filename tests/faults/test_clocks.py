"""Faults: wall clocks that jump or disagree — a worker's clock jumps an hour mid-run, two schedulers
run five minutes apart.

Promised: lease maths reads the server's clock, so a worker whose wall clock jumps forward or back
rescues nothing early, loses no lease of its own and runs nothing twice; two schedulers whose
clocks disagree fire each occurrence exactly once between them (the watermark fences the fire),
whichever of them leads.

The clocks are shifted per process (`harness.shifted_clock`: libfaketime when installed, else the
fault app's own shift of `time.time`); the machine's clock and the monotonic clock are untouched.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

import xjobs

from .fault_app import JOBS, Work, every_minute, tick, work
from .harness import Proc, Scene, shifted_clock, until, until_async
from .test_scheduler import ARMED, fired, leading, occurrence_rows

HOUR_S = 3600
SKEW_S = 300  # the second scheduler runs five minutes ahead
TTL_S = 2.0
MINUTE_MS = 60_000


@pytest.mark.scenario("worker clock jumps +1 h, then -1 h, mid-run")
@pytest.mark.asyncio
async def test_a_worker_whose_clock_jumps_rescues_nothing_early_and_keeps_its_leases(
    scene: Scene,
) -> None:
    offset = scene.folder / "jumper-clock"
    offset.write_text("+0")
    async with xjobs.App(scene.url, jobs=JOBS) as app:
        steady = scene.worker(concurrency=3)
        jumper = scene.worker(concurrency=3, clock=shifted_clock(offset))
        await scene.started(steady, jumper)
        keys = [f"clock-{n}" for n in range(12)]
        # each holds longer than the 2 s lease: only heartbeats keep it
        results = await work.enqueue_many([Work(key=k, hold_s=3.0) for k in keys])
        scene.ledger.acknowledge_all(keys, results)
        await until(
            lambda: scene.effects.running_in(steady.pid) and scene.effects.running_in(jumper.pid),
            what="runs on both workers",
        )
        async with scene.window("worker clock +1 h, then -1 h"):
            offset.write_text(f"+{HOUR_S}")
            await asyncio.sleep(2.5)  # past a lease: a rescue by wall clock would strike now
            offset.write_text(f"-{HOUR_S}")
            await asyncio.sleep(2.5)
            offset.write_text("+0")
        ledger = await scene.settle(app)
    jumped = [r for r in scene.effects.rows() if r["pid"] == jumper.pid]
    shifted = [r for r in jumped if abs(r["at"] - time.time()) > HOUR_S / 2]
    print(f"\n{len(shifted)} of the jumping worker's {len(jumped)} records carry a jumped clock")
    ledger.check(duplicated=0)
    assert shifted, "the clock jump never reached the worker process"
    for proc in (steady, jumper):
        assert not proc.lines("lease-lost"), proc.lines("lease-lost")[:3]
        assert not proc.lines("jobs.heartbeat.missed"), proc.lines("jobs.heartbeat.missed")[:3]


def scheduler_on(scene: Scene, clock: Path) -> Proc:
    """A scheduler on the system clock as `clock` (a file of seconds) shifts it."""
    return scene.scheduler(ttl_s=TTL_S, app="fault_app:skew_app", clock=shifted_clock(clock))


def armed_at(proc: Proc) -> int:
    """The watermark the task was armed with (ms, in the arming scheduler's clock)."""
    return min(int(m.group(1)) for m in ARMED.finditer(proc.text()))


@pytest.mark.scenario("two schedulers 5 min apart, leadership handed both ways")
@pytest.mark.asyncio
async def test_two_schedulers_with_skewed_clocks_fire_each_occurrence_once(scene: Scene) -> None:
    behind_clock, ahead_clock = scene.folder / "behind-clock", scene.folder / "ahead-clock"
    behind_clock.write_text("+0")
    async with xjobs.App(scene.url, jobs=[tick], tasks=[every_minute], retention=None) as app:
        behind = scheduler_on(scene, behind_clock)
        worker = scene.worker()
        await scene.started(behind, worker)
        await until(lambda: leading(behind) and ARMED.search(behind.text()), what="armed")
        # jump the leader's clock forward so the next whole minute falls 3 s from now
        first_ms = armed_at(behind) // MINUTE_MS * MINUTE_MS + MINUTE_MS
        offset_s = round(first_ms / 1000 - time.time() - 3)
        behind_clock.write_text(f"{offset_s:+d}")
        ahead_clock.write_text(f"{offset_s + SKEW_S:+d}")
        ahead = scheduler_on(scene, ahead_clock)
        await scene.started(ahead)
        await until_async(
            lambda: has_row(app, first_ms), what="the first occurrence to fire", timeout_s=20
        )
        scene.kill(behind)  # the one five minutes ahead leads, and catches up to its own now
        last_ms = first_ms + SKEW_S * 1000
        await until(lambda: leading(ahead), what="the ahead scheduler to lead", timeout_s=15)
        await until_async(
            lambda: has_row(app, last_ms), what="the ahead scheduler to catch up", timeout_s=15
        )
        again = scheduler_on(scene, behind_clock)
        await scene.started(again)
        scene.kill(ahead)  # back to a clock five minutes behind the watermark: it fires nothing
        await until(lambda: leading(again), what="the behind scheduler to lead", timeout_s=15)
        await asyncio.sleep(2 * TTL_S)
        rows = await occurrence_rows(app)
        for occurrence, ids in sorted(rows.items()):
            key = datetime.fromtimestamp(occurrence / 1000, UTC).isoformat()  # the tick's key
            scene.ledger.acked[ids[0]] = key
            for extra in ids[1:]:
                scene.ledger.unexplained.append(f"occurrence {occurrence} fired twice: {extra}")
        ledger = await scene.settle(app)
    logged = fired([behind, ahead, again])
    ledger.duplicated += sum(len(ids) - 1 for ids in rows.values())
    ledger.check(duplicated=0)
    assert rows, "nothing fired"
    expected = list(range(first_ms, max(rows) + 1, MINUTE_MS))
    assert sorted(rows) == expected, f"occurrences fired: {sorted(rows)}, due: {expected}"
    assert max(rows) >= last_ms, "the ahead scheduler did not catch up to its clock"
    assert max(rows) < last_ms + 2 * MINUTE_MS, "an occurrence fired past every clock"
    assert sorted(logged) == sorted(set(logged)), f"an occurrence was logged twice: {logged}"
    assert not fired([again]), "the scheduler behind the watermark fired"


async def has_row(app: xjobs.App, occurrence_ms: int) -> bool:
    """Whether the occurrence has a job row."""
    return occurrence_ms in await occurrence_rows(app)
