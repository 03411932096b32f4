"""The child-group scripts' calls: the parent's fence, a page's group and members, the spawned
count, a child's ending applied to its group, the parent's park in two steps, and its wake."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.children import ChildGroup
from xjobs.contract.driver import Claim, Nack
from xjobs_redis.calls.jobs import counted, counter_keys
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def child_fence(k: Keys, *, queue: str, claim: Claim) -> Call:
    """Whether the parent still holds `claim`."""
    return Call("child_fence", [k.job(queue, claim.job_id)], [claim.worker_id, claim.claims])


def child_group(k: Keys, *, group: ChildGroup, first_index: int, child_keys: Sequence[str]) -> Call:
    """Create the group (kept when it exists) and file one page's child keys by index."""
    run, step = group.parent_run_id, group.step
    keys = [k.group(run, step), k.group_members(run, step), k.run_groups(run)]
    declared = {
        "parent_id": group.parent_id,
        "parent_queue": group.parent_queue,
        "parent_run_id": run,
        "step": step,
        "total": group.total,
        "wait": 1 if group.wait else 0,
        "fail_fast": 1 if group.fail_fast else 0,
        "detached": 1 if group.detached else 0,
    }
    args: list[Arg] = [json.dumps(declared, ensure_ascii=False), first_index, *child_keys]
    return Call("child_group", keys, args)


def child_spawned(k: Keys, *, parent_run_id: str, step: str, upto: int) -> Call:
    """Move the group's spawned count up to `upto` (never down)."""
    return Call("child_spawned", [k.group(parent_run_id, step)], [upto])


def child_end(
    k: Keys, *, parent_run_id: str, step: str, child_id: str, index: int, state: str
) -> Call:
    """Count a child's ending into its group (once); answers whether to wake the parent."""
    keys = [k.group(parent_run_id, step), k.group_ended(parent_run_id, step)]
    return Call("child_end", keys, [child_id, index, state])


def child_parked(k: Keys, *, parent_run_id: str, step: str) -> Call:
    """Mark the group parked on; answers whether it resolved already."""
    return Call("child_parked", [k.group(parent_run_id, step)], [])


def child_park(
    k: Keys, *, now: str, queue: str, claim: Claim, nack: Nack, run_at_ms: int | None, group: str
) -> Call:
    """Store the park `nack` (due at `run_at_ms`), fenced on the claim, noting the `group` key."""
    keys = [
        *k.rescheduling(queue, claim.job_id),
        k.waiting(queue),
        k.errors(queue),
        *counter_keys(k, queue),
        k.created(queue),
    ]
    args: list[Arg] = [
        now,
        claim.worker_id,
        claim.claims,
        nack.state,
        1 if nack.counts_as_attempt else 0,
        "" if run_at_ms is None else run_at_ms,
        1 if nack.writes_error else 0,
        nack.error or "",
        claim.job_id,
        counted(nack.outcome),
        group,
    ]
    return Call("child_park", keys, args)


def child_wake(
    k: Keys, *, now: str, queue: str, parent_id: str, parent_run_id: str, step: str
) -> Call:
    """Make the parent due when it waits parked on the group."""
    keys = [k.job(queue, parent_id), k.ready(queue), k.delayed(queue), k.waiting(queue)]
    group = k.group(parent_run_id, step)
    return Call("child_wake", keys, [now, parent_run_id, group, k.wake_channel(), queue])
