"""What a due task does this round: which occurrences it fires and where a skip arms its watermark."""

from __future__ import annotations

from dataclasses import dataclass

from xjobs.declare.occurrences import latest_due
from xjobs.declare.task import TaskHandle


@dataclass(frozen=True, slots=True)
class CatchUpPlan:
    """The occurrences to fire in order (each fenced on the one before), or a watermark to arm to."""

    fires: tuple[int, ...] = ()
    arm_to: int | None = None


def plan_catch_up(task: TaskHandle, watermark_ms: int, now_ms: int, grace_ms: int) -> CatchUpPlan:
    """The task's policy over the occurrences in `(watermark, now]`.

    An occurrence seen within `grace_ms` of its time is on time and always fires; older ones are
    missed. `latest` fires the newest due once (the watermark rides that fire past the rest);
    `skip` fires the newest only if it is on time, else arms past it; `all` fires each, oldest
    first, bounded to the newest `max_catch_up`.
    """
    count = task.max_catch_up if task.catch_up == "all" else 1
    due = latest_due(task.cron, task.zone, watermark_ms, now_ms, count)
    if not due:
        return CatchUpPlan()
    newest = due[-1]
    if task.catch_up == "skip" and now_ms - newest > grace_ms:
        return CatchUpPlan(arm_to=newest)
    return CatchUpPlan(fires=tuple(due))
