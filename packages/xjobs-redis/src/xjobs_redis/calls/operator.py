"""The operator scripts' calls: the walk of an index, promote and remove, queue counts, counters."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from xjobs.contract.driver import FINISHED_STATES
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys

# The indexes a walk reads: `created`, a finished state's ZSET (both by creation), ready (its
# priority-0 band, where a job enqueued due now scores its created_at), or the leased ZSET (by
# lease: read whole and ordered by the script).
INDEXES = ("created", "ready", "leased", *sorted(FINISHED_STATES))


@dataclass(frozen=True, slots=True)
class WalkFilter:
    """What a walked job must match (`None` or empty: no condition), as `walk.lua` reads it."""

    states: tuple[str, ...] = ()
    name: str | None = None
    tenant: str | None = None
    after_ms: int | None = None
    before_ms: int | None = None
    run_after_ms: int | None = None
    free: bool = False
    enqueued: bool = False

    def as_json(self) -> str:
        """The filter's JSON, ARGV[4] of `walk.lua`."""
        return json.dumps(
            {
                "states": list(self.states),
                "name": self.name,
                "tenant": self.tenant,
                "after": self.after_ms,
                "before": self.before_ms,
                "run_after": self.run_after_ms,
                "free": self.free,
                "enqueued": self.enqueued,
            },
            ensure_ascii=False,
        )


def _index(k: Keys, queue: str, index: str) -> str:
    if index == "created":
        return k.created(queue)
    if index == "leased":
        return k.leased(queue)
    if index == "ready":
        return k.ready(queue)
    return k.finished(queue, index)


def walk(
    k: Keys,
    *,
    queue: str,
    index: str,
    newest: bool,
    position: tuple[int, str] | None,
    where: WalkFilter,
    want: int,
    budget: int,
    fields: Sequence[str],
) -> Call:
    """One step of a walk over `index` of `queue`, strictly past `position` (created_at_ms, id)."""
    if index not in INDEXES:
        raise ValueError(f"{index!r} is not a walkable index")
    keys = [_index(k, queue, index), k.live(queue)]
    args: list[Arg] = [
        "newest" if newest else "oldest",
        "" if position is None else position[0],
        "" if position is None else k.job(queue, position[1]),
        where.as_json(),
        0 if index == "leased" else 1,
        want,
        budget,
        *fields,
    ]
    return Call("walk", keys, args)


def promote(k: Keys, *, now: str, queue: str, job_ids: Sequence[str], answer_records: bool) -> Call:
    """Make the ready jobs among `job_ids` (one queue's) due now."""
    keys = [k.ready(queue), k.delayed(queue), *(k.job(queue, job_id) for job_id in job_ids)]
    args: list[Arg] = [now, 1 if answer_records else 0, k.wake_channel(), queue]
    return Call("promote", keys, args)


def remove(k: Keys, *, queue: str, jobs: Sequence[tuple[str, str]], answer_records: bool) -> Call:
    """Delete the finished jobs among `jobs` ((id, run_id) pairs of one queue) with their steps."""
    keys = [
        k.live(queue),
        k.created(queue),
        k.errors(queue),
        *(k.finished(queue, state) for state in ("completed", "failed", "dead", "cancelled")),
    ]
    for job_id, run_id in jobs:
        keys += [k.job(queue, job_id), k.steps(queue, run_id)]
    return Call("remove", keys, [1 if answer_records else 0])


def queue_counts(k: Keys, *, queue: str, now_ms: int, cap: int, bound: int) -> Call:
    """One queue's counts as of `now_ms`, each at most `cap`."""
    keys = [
        k.ready(queue),
        k.delayed(queue),
        k.leased(queue),
        k.waiting(queue),
        k.finished(queue, "dead"),
        k.finished(queue, "failed"),
        k.paused(queue),
        k.created(queue),
        k.finished(queue, "completed"),
        k.finished(queue, "cancelled"),
    ]
    return Call("queue_counts", keys, [now_ms, cap, bound])


def counters_read(k: Keys, *, queue: str, tier: str, since_ms: int) -> Call:
    """One queue's counters of `tier` from the bucket `since_ms` falls at or before."""
    keys = [k.counters(queue, tier), k.counter_index(queue, tier)]
    return Call("counters_read", keys, [since_ms])


def counters_rollup(k: Keys, *, queue: str, now_ms: int) -> Call:
    """Fold one queue's closed minute buckets into hour and day, and trim every tier."""
    keys = [
        k.counters(queue, "minute"),
        k.counter_index(queue, "minute"),
        k.counters(queue, "hour"),
        k.counter_index(queue, "hour"),
        k.counters(queue, "day"),
        k.counter_index(queue, "day"),
        k.counters_folded(queue),
    ]
    return Call("counters_rollup", keys, [now_ms])
