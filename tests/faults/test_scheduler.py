"""Faults: the scheduler leader is killed at a cron boundary, or stopped (SIGSTOP) across one.

Promised: every occurrence that came due fires exactly once across the fleet (one job row per
occurrence, one `jobs.scheduler.fired` line), the heir fires what the dead or frozen leader did
not, and a leader that wakes up after losing its lease fires nothing (its epoch is fenced).

The task fires every minute; the schedulers' clock is shifted (`XJOBS_FAULT_CLOCK_OFFSET_MS`, the
same in every scheduler process) so that a whole minute falls a few seconds after they start,
instead of waiting up to a minute of wall time for one.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime

import pytest

import xjobs
from xjobs.contract.introspection import JobFilter

from .fault_app import every_minute, tick
from .harness import Proc, Scene, until, until_async

LEAD_S = 10.0  # the boundary falls this long after the offset is chosen
TTL_S = 2.0
FIRED = re.compile(r"jobs\.scheduler\.fired .*occurrence_ms=(\d+)")
ARMED = re.compile(r"jobs\.scheduler\.armed .*watermark_ms=(\d+)")


def boundary(lead_s: float = LEAD_S) -> tuple[int, int, float]:
    """A clock offset putting a whole minute `lead_s` from now: (offset ms, that minute in the
    schedulers' time as epoch ms, the wall-clock instant it falls at)."""
    at = time.time() + lead_s
    minute_ms = int(at * 1000) // 60_000 * 60_000
    return minute_ms - int(at * 1000), minute_ms, at


def leading(proc: Proc) -> bool:
    """Whether the last leadership line of `proc` says it leads."""
    lines = [
        line
        for line in proc.text().splitlines()
        if "jobs.scheduler.leading" in line or "jobs.scheduler.leadership-lost" in line
    ]
    return bool(lines) and "jobs.scheduler.leading" in lines[-1]


def fired(procs: list[Proc]) -> list[int]:
    """Every occurrence any scheduler logged as fired."""
    return [int(m.group(1)) for p in procs for m in FIRED.finditer(p.text())]


def next_boundary(minute_ms: int, at: float, margin_s: float) -> tuple[int, float]:
    """The planned boundary, or a later one when the fleet came up too late to strike there
    (a busy machine starts processes slowly)."""
    while time.time() > at - margin_s:
        minute_ms, at = minute_ms + 60_000, at + 60
    return minute_ms, at


def due(fleet: list[Proc], offset_ms: int) -> list[int]:
    """Every whole minute after the task was armed, up to the schedulers' now."""
    armed = min(int(m.group(1)) for p in fleet for m in ARMED.finditer(p.text()))
    now = time.time_ns() // 1_000_000 + offset_ms
    first = armed // 60_000 * 60_000 + 60_000
    return list(range(first, now + 1, 60_000))


async def sleep_until(epoch_s: float) -> None:
    await asyncio.sleep(max(0.0, epoch_s - time.time()))


async def occurrence_rows(app: xjobs.App) -> dict[int, list[str]]:
    """Job ids of the task's job per occurrence (from the idempotency key `task:<ms>:<key>`)."""
    page = await app.operator.list_jobs(JobFilter(name=tick.name), limit=100)
    found: dict[int, list[str]] = {}
    for summary in page.jobs:
        record = await app.get_job(summary.id)
        occurrence = int(record.idempotency_key.split(":")[1])
        found.setdefault(occurrence, []).append(record.id)
    return found


async def has_fired(app: xjobs.App, occurrence: int) -> bool:
    """Whether a job row of `occurrence` exists (the leader may die before it logs the fire)."""
    return occurrence in await occurrence_rows(app)


async def cron_ledger(scene: Scene, app: xjobs.App, offset_ms: int, schedulers: list[Proc]) -> None:
    """Each due occurrence must have exactly one job row and one fired line; its job must run."""
    due_now = due(schedulers, offset_ms)
    assert due_now, "no occurrence came due"
    rows = await occurrence_rows(app)
    logged = fired(schedulers)
    missing = 0
    for occurrence in due_now:
        key = datetime.fromtimestamp(occurrence / 1000, UTC).isoformat()
        ids = rows.get(occurrence, [])
        if not ids:
            missing += 1
            scene.ledger.notes.append(f"occurrence {key} never fired")
            continue
        scene.ledger.acked[ids[0]] = key
        for extra in ids[1:]:
            scene.ledger.unexplained.append(f"occurrence {key} fired twice: rows {ids[0]}, {extra}")
    ledger = await scene.settle(app)
    ledger.acknowledged += missing
    ledger.lost += missing
    ledger.duplicated += sum(len(v) - 1 for v in rows.values())
    extra_rows = sorted(set(rows) - set(due_now))
    assert not extra_rows, f"occurrences that were never due fired: {extra_rows}"
    assert sorted(logged) == sorted(set(logged)), f"an occurrence was logged twice: {logged}"


@pytest.mark.scenario("kill -9 scheduler leader at a cron boundary")
@pytest.mark.asyncio
async def test_kill_9_of_the_scheduler_leader_at_a_cron_boundary(scene: Scene) -> None:
    offset_ms, minute_ms, at = boundary()
    scene.extra_env["XJOBS_FAULT_CLOCK_OFFSET_MS"] = str(offset_ms)
    async with xjobs.App(scene.url, jobs=[tick], tasks=[every_minute], retention=None) as app:
        fleet = [scene.scheduler(ttl_s=TTL_S), scene.scheduler(ttl_s=TTL_S)]
        worker = scene.worker()
        await scene.started(*fleet, worker)
        await until(lambda: sum(map(leading, fleet)) == 1, what="one leader")
        (leader,) = [s for s in fleet if leading(s)]
        minute_ms, at = next_boundary(minute_ms, at, 0.5)
        await sleep_until(at)
        scene.kill(leader)  # right at the boundary: it may or may not have fired
        (heir,) = [s for s in fleet if s is not leader]
        await until(lambda: leading(heir), what="the heir to lead", timeout_s=3 * TTL_S + 5)
        await until_async(
            lambda: has_fired(app, minute_ms), what="the occurrence to fire", timeout_s=15
        )
        await asyncio.sleep(TTL_S)  # a late second fire would show now
        await cron_ledger(scene, app, offset_ms, fleet)
    scene.ledger.check(duplicated=0)


@pytest.mark.scenario("SIGSTOP scheduler leader across a minute boundary")
@pytest.mark.asyncio
async def test_sigstop_of_the_scheduler_leader_across_a_minute_boundary(scene: Scene) -> None:
    offset_ms, minute_ms, at = boundary()
    scene.extra_env["XJOBS_FAULT_CLOCK_OFFSET_MS"] = str(offset_ms)
    async with xjobs.App(scene.url, jobs=[tick], tasks=[every_minute], retention=None) as app:
        fleet = [scene.scheduler(ttl_s=TTL_S), scene.scheduler(ttl_s=TTL_S)]
        worker = scene.worker()
        await scene.started(*fleet, worker)
        await until(lambda: sum(map(leading, fleet)) == 1, what="one leader")
        (leader,) = [s for s in fleet if leading(s)]
        (heir,) = [s for s in fleet if s is not leader]
        minute_ms, at = next_boundary(minute_ms, at, 1.5)
        await sleep_until(at - 1.0)
        async with scene.window("SIGSTOP scheduler leader"):
            leader.pause()
            await until(lambda: leading(heir), what="the heir to lead", timeout_s=3 * TTL_S + 5)
            await until(lambda: minute_ms in fired([heir]), what="the heir to fire", timeout_s=15)
            await sleep_until(at + 2 * TTL_S)  # frozen for several leases
            leader.resume()
        await asyncio.sleep(2 * TTL_S)  # the woken leader's stale round, if any, runs now
        assert leader.alive, leader.text()[-2000:]
        await cron_ledger(scene, app, offset_ms, fleet)
    scene.ledger.check(duplicated=0)
    assert minute_ms not in fired([leader]), "the frozen leader fired the occurrence too"
