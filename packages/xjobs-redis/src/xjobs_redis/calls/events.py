"""The step and event scripts' calls: the fenced step write, and the event bus's send, wake, find,
park, purge, and the drop of a removed or lapsed job's wait."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from xjobs.contract.driver import Claim, Nack
from xjobs.contract.introspection import COUNTED_OUTCOMES
from xjobs.contract.stores import EventWait, StepRecord
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys

# How many stored events one step of a find reads at most (event_find.lua): a find over a busy
# name is several short script calls, never one that holds the server while it walks them all.
FIND_BATCH: Final = 200


def step_put(k: Keys, *, queue: str, claim: Claim, record: StepRecord) -> Call:
    """Write one step of the claim's run (the run id and the name are the key and the field)."""
    value = {
        "status": record.status,
        "result": record.result,
        "error": record.error,
        "position": record.position,
        "created_at_ms": record.created_at_ms,
    }
    keys = [k.job(queue, claim.job_id), k.steps(queue, record.run_id)]
    args: list[Arg] = [
        claim.worker_id,
        claim.claims,
        record.name,
        json.dumps(value, ensure_ascii=False),
    ]
    return Call("step_put", keys, args)


def event_send(
    k: Keys, *, now: str, name: str, event_id: str, payload: str, tenant: str | None = None
) -> Call:
    """Store an event of `name` in `tenant`; answers its sent time and the queues whose waits to
    wake."""
    topic = k.event_topic(name, tenant)
    keys = [k.event_names(), k.events_sent(topic), k.event_payloads(), k.event_queues(topic)]
    return Call("event_send", keys, [now, event_id, payload])


def event_wake(
    k: Keys,
    *,
    now: str,
    queue: str,
    name: str,
    payload: str,
    job_id: str | None = None,
    tenant: str | None = None,
) -> Call:
    """Wake `queue`'s waits for `name` in `tenant` that `payload` matches (only `job_id`'s, when
    given)."""
    keys = [
        k.event_waits(queue),
        k.event_waiting(queue, k.event_topic(name, tenant)),
        k.event_deadlines(queue),
        k.ready(queue),
        k.delayed(queue),
        k.waiting(queue),
    ]
    return Call("event_wake", keys, [now, payload, job_id or ""])


def event_find(
    k: Keys,
    *,
    name: str,
    match: str,
    since_ms: int,
    tenant: str | None = None,
    after: str = "",
    batch: int = FIND_BATCH,
) -> Call:
    """One step of the find of the earliest event of `name` in `tenant` sent since `since_ms`
    that `match` matches: `batch` events at most, after the cursor `after` ('' to begin)."""
    keys = [k.events_sent(k.event_topic(name, tenant)), k.event_payloads()]
    return Call("event_find", keys, [match, since_ms, after, batch])


def _wait_entry(k: Keys, wait: EventWait) -> str:
    """A wait as stored: its fields, and the keys its drop and its wake read from it (its waiting
    SET and its job, both in the queue's slot, so no script builds a key)."""
    entry = {
        "job_id": wait.job_id,
        "run_id": wait.run_id,
        "queue": wait.queue,
        "step": wait.step,
        "event": wait.event,
        "tenant": wait.tenant,
        "match": wait.match,
        "since_ms": wait.since_ms,
        "deadline_ms": wait.deadline_ms,
        "index": k.event_waiting(wait.queue, k.event_topic(wait.event, wait.tenant)),
        "job": k.job(wait.queue, wait.job_id),
    }
    return json.dumps(entry, ensure_ascii=False)


def event_park(k: Keys, *, now: str, queue: str, claim: Claim, wait: EventWait, nack: Nack) -> Call:
    """Register `wait` and store the settle room's park `nack` (its live state) in one step."""
    keys = [
        *k.rescheduling(queue, claim.job_id),
        k.event_waits(queue),
        k.event_waiting(queue, k.event_topic(wait.event, wait.tenant)),
        k.event_deadlines(queue),
        k.waiting(queue),
        k.errors(queue),
        k.counters(queue, "minute"),
        k.counter_index(queue, "minute"),
        k.created(queue),
    ]
    args: list[Arg] = [
        now,
        claim.worker_id,
        claim.claims,
        nack.state,
        1 if nack.counts_as_attempt else 0,
        "" if nack.run_at_ms is None else nack.run_at_ms,
        1 if nack.writes_error else 0,
        nack.error or "",
        wait.job_id,
        _wait_entry(k, wait),
        "" if wait.deadline_ms is None else wait.deadline_ms,
        nack.outcome if nack.outcome in COUNTED_OUTCOMES else "",
    ]
    return Call("event_park", keys, args)


def wait_drop(k: Keys, *, queue: str, job_ids: Sequence[str]) -> Call:
    """Drop the event waits of `queue`'s removed jobs."""
    return Call("wait_drop", [k.event_waits(queue), k.event_deadlines(queue)], list(job_ids))


def wait_lapse(k: Keys, *, queue: str, older_than_ms: int) -> Call:
    """Drop `queue`'s waits whose deadline fell before `older_than_ms`."""
    keys = [k.event_waits(queue), k.event_deadlines(queue)]
    return Call("wait_lapse", keys, [older_than_ms])


def event_purge(k: Keys, *, older_than_ms: int) -> Call:
    """Drop the events sent before `older_than_ms`; answers every name's queues with their count."""
    keys = [k.event_names(), k.event_payloads(), k.event_waited()]
    return Call("event_purge", keys, [older_than_ms])


def event_queues_prune(k: Keys, *, unwaited: Sequence[tuple[str, str, str]]) -> Call:
    """Drop each `(topic, queue, park count)`: a queue found holding no wait for the topic (an
    event name in a tenant, `Keys.event_topic`), unless a park counted itself since."""
    keys = [k.event_waited(), *(k.event_queues(topic) for topic, _, _ in unwaited)]
    args: list[Arg] = [json.dumps([queue, count]) for _, queue, count in unwaited]
    return Call("event_queues_prune", keys, args)
