"""The step and event scripts' calls: the fenced step write, and the event bus's send, wake, find,
park, purge, and the drop of a removed or lapsed job's wait."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.driver import Claim, Nack
from xjobs.contract.introspection import COUNTED_OUTCOMES
from xjobs.contract.stores import EventWait, StepRecord
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


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


def event_send(k: Keys, *, now: str, name: str, event_id: str, payload: str) -> Call:
    """Store an event of `name`; answers its sent time and the queues whose waits to wake."""
    keys = [k.event_names(), k.events_sent(name), k.event_payloads(), k.event_queues(name)]
    return Call("event_send", keys, [now, event_id, payload])


def event_wake(
    k: Keys, *, now: str, queue: str, name: str, payload: str, job_id: str | None = None
) -> Call:
    """Wake `queue`'s waits for `name` that `payload` matches (only `job_id`'s, when given)."""
    keys = [
        k.event_waits(queue),
        k.event_waiting(queue, name),
        k.event_deadlines(queue),
        k.ready(queue),
        k.delayed(queue),
        k.waiting(queue),
    ]
    return Call("event_wake", keys, [now, payload, job_id or ""])


def event_find(k: Keys, *, name: str, match: str, since_ms: int) -> Call:
    """Find the earliest event of `name` sent since `since_ms` that `match` matches."""
    return Call("event_find", [k.events_sent(name), k.event_payloads()], [match, since_ms])


def _wait_entry(k: Keys, wait: EventWait) -> str:
    """A wait as stored: its fields, and the keys its drop and its wake read from it (its waiting
    SET and its job, both in the queue's slot, so no script builds a key)."""
    entry = {
        "job_id": wait.job_id,
        "run_id": wait.run_id,
        "queue": wait.queue,
        "step": wait.step,
        "event": wait.event,
        "match": wait.match,
        "since_ms": wait.since_ms,
        "deadline_ms": wait.deadline_ms,
        "index": k.event_waiting(wait.queue, wait.event),
        "job": k.job(wait.queue, wait.job_id),
    }
    return json.dumps(entry, ensure_ascii=False)


def event_park(k: Keys, *, now: str, queue: str, claim: Claim, wait: EventWait, nack: Nack) -> Call:
    """Register `wait` and store the settle room's park `nack` (its live state) in one step."""
    keys = [
        *k.rescheduling(queue, claim.job_id),
        k.event_waits(queue),
        k.event_waiting(queue, wait.event),
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
    """Drop each `(event name, queue, park count)`: a queue found holding no wait for the name,
    unless a park counted itself since."""
    keys = [k.event_waited(), *(k.event_queues(name) for name, _, _ in unwaited)]
    args: list[Arg] = [json.dumps([queue, count]) for _, queue, count in unwaited]
    return Call("event_queues_prune", keys, args)
