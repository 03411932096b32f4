"""The job scripts' calls: enqueue, claim and peek, the fenced settles, and the one-queue moves."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.driver import Claim, Nack, NewJob
from xjobs.contract.introspection import COUNTED_OUTCOMES
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys
from xjobs_redis.rows import enqueue_row


def counted(outcome: str) -> str:
    """A settle's counter argument: the outcome when it is counted, else ''."""
    return outcome if outcome in COUNTED_OUTCOMES else ""


def _run_steps(k: Keys, queue: str, claim: Claim) -> str:
    """The steps HASH of the claim's run, or the job HASH standing in when the claim names no run
    (a settle then sets no expiry: see lib's expire_finished)."""
    if claim.run_id is None:
        return k.job(queue, claim.job_id)
    return k.steps(queue, claim.run_id)


def counter_keys(k: Keys, queue: str) -> list[str]:
    """The minute counters HASH and its index, as every settling script takes them."""
    return [k.counters(queue, "minute"), k.counter_index(queue, "minute")]


def enqueue(
    k: Keys,
    *,
    now: str,
    queue: str,
    jobs: Sequence[NewJob],
    links: Sequence[str] | None = None,
) -> Call:
    """One queue's batch, in order: each job's HASH key and its row's JSON (a throttled row's
    namespace key follows the job keys, its index in KEYS in the row as `tk`; a child's row
    carries its `link` to its group, `xjobs_redis.children`)."""
    keys = [
        k.ready(queue),
        k.delayed(queue),
        k.live(queue),
        k.joined(queue),
        k.created(queue),
    ]
    keys += [k.job(queue, job.id) for job in jobs]
    rows = list(map(enqueue_row, jobs))
    for r, job in enumerate(jobs):
        if job.debounce_ms is not None or job.throttle_ms is not None:
            rows[r] = _flow_row(k, keys, rows[r], job)
    for r, link in enumerate(links or ()):
        rows[r] = json.dumps({**json.loads(rows[r]), "link": link}, ensure_ascii=False)
    return Call("enqueue", keys, [now, queue, k.wake_channel(), *rows])


def _flow_row(k: Keys, keys: list[str], row: str, job: NewJob) -> str:
    """A debounced or throttled row: its windows, and a throttled row's namespace key in `keys`."""
    decoded = json.loads(row)
    decoded["debounce_ms"] = job.debounce_ms
    decoded["throttle_ms"] = job.throttle_ms
    if job.throttle_ms is not None:
        namespace = json.dumps([job.name, job.tenant_id or "", job.idempotency_key])
        keys.append(k.throttle(job.queue, namespace))
        decoded["tk"] = len(keys)  # Lua's KEYS are 1-based
    return json.dumps(decoded, ensure_ascii=False, separators=(",", ":"))


def claim(
    k: Keys,
    *,
    now: str,
    queue: str,
    take: int,
    worker_id: str,
    lease_ms: int,
    buried_error: str,
    sweep_bound: int,
) -> Call:
    """One queue's share of a claim pass: promote, rescue, bury, then take up to `take` jobs."""
    keys = [
        k.ready(queue),
        k.delayed(queue),
        k.leased(queue),
        k.live(queue),
        k.finished(queue, "dead"),
        k.finished(queue, "failed"),
        k.created(queue),
        k.waiting(queue),
        k.paused(queue),
        k.paused_names(queue),
        k.errors(queue),
        *counter_keys(k, queue),
    ]
    return Call("claim", keys, [now, take, worker_id, lease_ms, buried_error, sweep_bound])


def peek(k: Keys, *, now: str, queue: str, want: int, sweep_bound: int) -> Call:
    """The read-only look at a queue's best `want` candidates, as its claim would see them."""
    keys = [
        k.ready(queue),
        k.delayed(queue),
        k.leased(queue),
        k.paused(queue),
        k.paused_names(queue),
    ]
    return Call("peek", keys, [now, want, sweep_bound])


def ack(
    k: Keys, *, now: str, queue: str, claim: Claim, result: str | None = None, keep: str = ""
) -> Call:
    """Settle the claim's run completed (and count it), storing `result` (JSON) when given;
    `keep` is the retention policy's JSON (`purge.Expiry`), '' while retention is off."""
    keys = [
        k.job(queue, claim.job_id),
        k.leased(queue),
        k.live(queue),
        k.finished(queue, "completed"),
        k.created(queue),
        *counter_keys(k, queue),
        _run_steps(k, queue, claim),
    ]
    keep = keep if claim.run_id is not None else ""
    return Call("ack", keys, [now, claim.worker_id, claim.claims, keep, result or ""])


def ack_many(k: Keys, *, now: str, queue: str, claims: Sequence[Claim], keep: str = "") -> Call:
    """Settle the claims' runs of one queue completed in one call, each fenced on its own claim
    as `ack` is; a claim that names no run passes its job key for its steps (no expiry)."""
    keys = [
        k.leased(queue),
        k.live(queue),
        k.finished(queue, "completed"),
        k.created(queue),
        *counter_keys(k, queue),
    ]
    args: list[Arg] = [now, keep]
    for claim in claims:
        keys += [k.job(queue, claim.job_id), _run_steps(k, queue, claim)]
        args += [claim.worker_id, claim.claims]
    return Call("ack_many", keys, args)


def watch(k: Keys, *, queue: str, job_id: str) -> Call:
    """Flag a live job watched: its settle publishes its id on the queue's settled channel."""
    return Call("watch", [k.job(queue, job_id)], [k.settled_channel(queue)])


def nack(k: Keys, *, now: str, queue: str, claim: Claim, nack: Nack, keep: str = "") -> Call:
    """Store the settle room's `nack` as it is: its state, run_at, attempt, error and counter."""
    # A live state files the job in no finished ZSET; the failed one stands in, untouched, so
    # the script's KEYS keep one shape.
    filed = nack.state if nack.terminal else "failed"
    keys = [
        *k.rescheduling(queue, claim.job_id),
        k.live(queue),
        k.finished(queue, filed),
        k.created(queue),
        k.waiting(queue),
        k.errors(queue),
        *counter_keys(k, queue),
        _run_steps(k, queue, claim),
    ]
    keep = keep if claim.run_id is not None else ""
    args: list[Arg] = [
        now,
        claim.worker_id,
        claim.claims,
        nack.state,
        1 if nack.terminal else 0,
        "" if nack.run_at_ms is None else nack.run_at_ms,
        1 if nack.counts_as_attempt else 0,
        1 if nack.writes_error else 0,
        nack.error or "",
        claim.job_id,
        keep,
        counted(nack.outcome),
    ]
    return Call("nack", keys, args)


def heartbeat(k: Keys, *, now: str, queue: str, claim: Claim, lease_ms: int) -> Call:
    """Extend the claim's lease to now + `lease_ms`."""
    keys = [k.job(queue, claim.job_id), k.leased(queue)]
    return Call("heartbeat", keys, [now, claim.worker_id, claim.claims, lease_ms])


def record_progress(k: Keys, *, now: str, queue: str, claim: Claim, progress: float) -> Call:
    """Store the run's progress, spelled as Python's `repr` of the float."""
    args: list[Arg] = [now, claim.worker_id, claim.claims, repr(float(progress))]
    return Call("record_progress", [k.job(queue, claim.job_id)], args)


def cancel(
    k: Keys, *, now: str, queue: str, job_ids: Sequence[str], error: str, answer_records: bool
) -> Call:
    """Cancel the live jobs among `job_ids` (one queue's), storing `error` as their last_error."""
    keys = [
        k.ready(queue),
        k.delayed(queue),
        k.leased(queue),
        k.live(queue),
        k.finished(queue, "cancelled"),
        k.created(queue),
        k.waiting(queue),
        *counter_keys(k, queue),
        *(k.job(queue, job_id) for job_id in job_ids),
    ]
    return Call("cancel", keys, [now, error, 1 if answer_records else 0])


def requeue(
    k: Keys, *, now: str, queue: str, jobs: Sequence[tuple[str, str]], answer_records: bool
) -> Call:
    """Put the finished jobs among `jobs` ((id, run_id) pairs of one queue) back to ready, each as
    `requeue` does; their steps HASHes lose the expiry a finish set (retention)."""
    keys = [k.ready(queue), k.live(queue), k.created(queue)]
    keys += [k.finished(queue, state) for state in ("completed", "failed", "dead", "cancelled")]
    for job_id, run_id in jobs:
        keys += [k.job(queue, job_id), k.steps(queue, run_id)]
    return Call("requeue", keys, [now, 1 if answer_records else 0])
