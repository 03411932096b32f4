"""The scheduler scripts' calls: a watermark's compare-and-set, a fire, and the leadership."""

from __future__ import annotations

import dataclasses
import json

from xjobs.contract.driver import NewJob
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def _watermark(previous_ms: int | None) -> str:
    """The compare-and-set operand: '' for a task with no watermark yet."""
    return "" if previous_ms is None else str(previous_ms)


def scheduler_arm(k: Keys, *, task: str, previous_ms: int | None, watermark_ms: int) -> Call:
    """Move `task`'s watermark from `previous_ms` (what the scheduler read) to `watermark_ms`."""
    args: list[Arg] = [task, _watermark(previous_ms), watermark_ms]
    return Call("scheduler_arm", [k.scheduler_watermarks()], args)


def scheduler_fire(
    k: Keys,
    *,
    now: str,
    task: str,
    previous_ms: int | None,
    occurrence_ms: int,
    job: NewJob,
) -> Call:
    """A fire's first step: the watermark's move, leaving the fire pending with `job` (every
    field of it, so any scheduler can complete the fire)."""
    keys = [k.scheduler_watermarks(), k.scheduler_pending()]
    row = json.dumps(dataclasses.asdict(job), ensure_ascii=False, separators=(",", ":"))
    args: list[Arg] = [now, task, _watermark(previous_ms), occurrence_ms, row]
    return Call("scheduler_fire", keys, args)


def scheduler_fired(k: Keys, *, task: str, occurrence_ms: int, job_id: str) -> Call:
    """A fire's last step, once its job is enqueued: the pending fire recorded with `job_id`."""
    keys = [k.scheduler_pending(), k.scheduler_fires()]
    return Call("scheduler_fired", keys, [task, occurrence_ms, job_id])


def leader_acquire(k: Keys, *, now: str, candidate: str, ttl_ms: int) -> Call:
    """Take or renew the leadership for `candidate`, for `ttl_ms`."""
    return Call("leader_acquire", [k.scheduler_leader()], [now, candidate, ttl_ms])


def leader_release(k: Keys, *, candidate: str) -> Call:
    """Give the leadership up if `candidate` holds it."""
    return Call("leader_release", [k.scheduler_leader()], [candidate])
