"""`xjobs migrate`'s copy of what is not a job: each cron task's watermark and pause, queue and job pauses.

A task's watermark is what keeps the target's scheduler from firing an occurrence the source
already fired; it is moved forward only (a target that is further along keeps its own). The
tasks are the ones the source saw fire (`task_fires`): the contract lists no other.
"""

from __future__ import annotations

from dataclasses import dataclass

from xjobs.contract.backend import Backend


@dataclass
class StateCounts:
    """How many task watermarks, task pauses and queue or job pauses the copy wrote."""

    tasks: int = 0
    task_pauses: int = 0
    pauses: int = 0


async def copy_schedules(source: Backend, target: Backend, counts: StateCounts) -> None:
    """Each fired task's watermark (forward only) and its pause."""
    if source.scheduler is None or target.scheduler is None:
        return
    names = sorted(await source.scheduler.task_fires(None))
    if not names:
        return
    theirs = await target.scheduler.watermarks(names)
    for name, mark in sorted((await source.scheduler.watermarks(names)).items()):
        have = theirs.get(name)
        if (have is None or have < mark) and await target.scheduler.arm(name, have, mark):
            counts.tasks += 1
    for name in sorted(await source.scheduler.paused(names)):
        if await target.scheduler.pause(name):
            counts.task_pauses += 1


async def copy_pauses(source: Backend, target: Backend, counts: StateCounts) -> None:
    """Every queue and job-name pause (after the jobs: a paused queue is not claimed)."""
    if source.introspection is None or target.introspection is None:
        return
    for pause in await source.introspection.pauses():
        if await target.introspection.pause(pause.kind, pause.name):
            counts.pauses += 1
