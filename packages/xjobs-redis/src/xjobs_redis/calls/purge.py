"""The retention scripts' calls: one batch of the purge of a queue's finished jobs, its counters, or the worker registry."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from xjobs.contract.introspection import CounterTier
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def purge_jobs(
    k: Keys,
    *,
    queue: str,
    state: str,
    cutoff_ms: int,
    names: Mapping[str, int],
    jobs: Sequence[tuple[str, str | None]],
) -> Call:
    """Purge `jobs` ((id, run_id or `None` when its HASH is gone) of one queue's finished `state`)
    if they are still past their cut-off: the state's, or their name's in `names`."""
    keys = [k.finished(queue, state), k.errors(queue)]
    for job_id, run_id in jobs:
        job = k.job(queue, job_id)
        keys += [job, job if run_id is None else k.steps(queue, run_id)]
    ids = json.dumps([job_id for job_id, _ in jobs])
    args: list[Arg] = [state, cutoff_ms, json.dumps(dict(names)), ids]
    return Call("purge_jobs", keys, args)


def purge_counters(
    k: Keys, *, queue: str, tier: CounterTier, cutoff_ms: int, limit: int, dry: bool
) -> Call:
    """Delete (or, `dry`, count) up to `limit` fields of a tier that start before `cutoff_ms`."""
    keys = [k.counters(queue, tier), k.counter_index(queue, tier), k.counters_folded(queue)]
    return Call("purge_counters", keys, [tier, cutoff_ms, limit, 1 if dry else 0])


def purge_workers(k: Keys, *, cutoff_ms: int, limit: int, dry: bool) -> Call:
    """Delete (or, `dry`, count) up to `limit` worker rows that expired before `cutoff_ms`."""
    keys = [k.workers(), k.worker_info(), k.worker_seen()]
    return Call("purge_workers", keys, [cutoff_ms, limit, 1 if dry else 0])


def purge_events_count(k: Keys, *, cutoff_ms: int) -> Call:
    """The dry run of `event_purge`: the events sent before `cutoff_ms`."""
    return Call("purge_events_count", [k.event_names()], [cutoff_ms])
