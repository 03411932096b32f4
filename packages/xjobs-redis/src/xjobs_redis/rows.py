"""Job rows to and from Redis: the enqueue row's JSON, and the scripts' replies as wire records.

A job HASH holds the `JobRecord` columns as text, compactly: a column that is `None` is an
absent field, and so is one at its default (`JOB_DEFAULTS`, the same as `lib.lua`'s: `id` and
`queue` are in the key, `run_at_ms` and `updated_at_ms` default to `created_at_ms`); the columns an
enqueue writes and no settle changes go under a short field name (`SHORT_FIELDS`). A HASH of the
older layout holds every column under its own name, so a read asks for both (`stored_names`).
The scripts answer columns by name with the defaults filled in; `stored_columns` does the same
for a HASH read directly.
The field orders below are the ones `claim.lua` answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from xjobs.contract.driver import (
    BuriedJob,
    ClaimedJob,
    EnqueueResult,
    JobMove,
    JobRecord,
    JobState,
    NewJob,
)
from xjobs.contract.introspection import AttemptError, JobSummary
from xjobs.errors import OptionInvalidError, PayloadInvalidError

CLAIMED_FIELDS = (
    "id",
    "run_id",
    "name",
    "queue",
    "tenant_id",
    "payload",
    "priority",
    "attempt",
    "max_attempts",
    "dead_letter",
    "claims",
    "lease_until_ms",
    "enqueued_by",
    "traceparent",
    "created_at_ms",
    "run_at_ms",
)
SUMMARY_FIELDS = (
    "id",
    "name",
    "queue",
    "state",
    "tenant_id",
    "priority",
    "attempt",
    "max_attempts",
    "run_at_ms",
    "created_at_ms",
    "updated_at_ms",
    "finished_at_ms",
    "claimed_by",
    "progress",
    "last_error",
)
BURIED_FIELDS = ("id", "run_id", "name", "queue", "tenant_id", "payload", "state", "attempt")
# A column absent from a job HASH reads as this (lib.lua's JOB_DEFAULTS).
JOB_DEFAULTS = {
    "state": "ready",
    "priority": "0",
    "attempt": "0",
    "claims": "0",
    "max_attempts": "5",
    "dead_letter": "1",
}
# The short field name of each column an enqueue writes and no settle changes (lib.lua's SHORT).
SHORT_FIELDS = {
    "run_id": "r",
    "name": "n",
    "idempotency_key": "k",
    "payload": "p",
    "created_at_ms": "c",
    "tenant_id": "t",
    "enqueued_by": "e",
    "traceparent": "tp",
    "max_attempts": "m",
    "dead_letter": "d",
    "priority": "pr",
}
COLUMNS_OF_SHORT = {short: column for column, short in SHORT_FIELDS.items()}
# The columns that default to the job's created_at_ms when absent.
CREATED_DEFAULTS = ("run_at_ms", "updated_at_ms")
# The ready score is priority * 2^42 + run_at_ms in a double: exact while |priority| < 2^10.
PRIORITY_BOUND = 1023


def enqueue_row(job: NewJob) -> str:
    """One row of `enqueue.lua` as JSON.

    The namespace joins name, tenant and key with NUL, so neither may hold one (Postgres text
    refuses NUL too).
    """
    for column, value in (("tenant_id", job.tenant_id), ("idempotency_key", job.idempotency_key)):
        if value is not None and "\x00" in value:
            raise PayloadInvalidError(f"{column} of job {job.id} holds a NUL character")
    if not -PRIORITY_BOUND <= job.priority <= PRIORITY_BOUND:
        raise OptionInvalidError(
            f"priority {job.priority} of job {job.id} is outside the Redis driver's "
            f"-{PRIORITY_BOUND}..{PRIORITY_BOUND} (declarations allow 0..9)"
        )
    row = {
        "id": job.id,
        "run_id": job.run_id,
        "name": job.name,
        "queue": job.queue,
        "tenant_id": job.tenant_id,
        "idempotency_key": job.idempotency_key,
        "payload": job.payload,
        "priority": job.priority,
        "run_at_ms": job.run_at_ms,
        "max_attempts": job.max_attempts,
        "dead_letter": job.dead_letter,
        "enqueued_by": job.enqueued_by,
        "traceparent": job.traceparent,
    }
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def enqueue_result(job: NewJob, answer: Any) -> EnqueueResult:
    """A row's answer of `enqueue.lua`: 1 for an insert (the row's own ids), else the ids of the
    job that deduped it."""
    if answer == 1:
        return EnqueueResult(job.id, job.run_id, deduped=False)
    job_id, run_id = answer
    return EnqueueResult(str(job_id), str(run_id), deduped=True)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def claimed_job(packed: str, worker_id: str) -> tuple[ClaimedJob, int]:
    """A claimed job from `claim.lua`'s reply (one JSON array of `CLAIMED_FIELDS` a job), with
    its run_at (for the claim order across queues). Unpacked in `CLAIMED_FIELDS`' order, not
    zipped into a mapping first: this runs once per claimed job."""
    (
        job_id,
        run_id,
        name,
        queue,
        tenant_id,
        payload,
        priority,
        attempt,
        max_attempts,
        dead_letter,
        claims,
        lease_until_ms,
        enqueued_by,
        traceparent,
        created_at_ms,
        run_at_ms,
    ) = json.loads(packed)
    due_at_ms = int(run_at_ms)
    job = ClaimedJob(
        id=job_id,
        run_id=run_id,
        name=name,
        queue=queue,
        tenant_id=tenant_id,
        payload=payload,
        priority=int(priority),
        attempt=int(attempt),
        max_attempts=int(max_attempts),
        dead_letter=dead_letter == "1",
        claims=int(claims),
        worker_id=worker_id,
        lease_until_ms=int(lease_until_ms),
        enqueued_by=enqueued_by,
        traceparent=traceparent,
        created_at_ms=int(created_at_ms),
        due_at_ms=due_at_ms,
    )
    return job, due_at_ms


def buried_job(fields: Sequence[Any]) -> BuriedJob:
    """A buried job from `claim.lua`'s reply."""
    row = dict(zip(BURIED_FIELDS, fields, strict=True))
    return BuriedJob(
        id=row["id"],
        run_id=row["run_id"],
        name=row["name"],
        queue=row["queue"],
        tenant_id=row["tenant_id"],
        payload=row["payload"],
        state="dead" if row["state"] == "dead" else "failed",
        attempt=int(row["attempt"]),
    )


def flat_hash(flat: Sequence[Any]) -> dict[str, str]:
    """A script's HGETALL reply (field, value, ...) as a mapping."""
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}


def job_state(value: str) -> JobState:
    """A stored state string as a `JobState`."""
    states: dict[str, JobState] = {
        "ready": "ready",
        "running": "running",
        "waiting": "waiting",
        "completed": "completed",
        "failed": "failed",
        "dead": "dead",
        "cancelled": "cancelled",
    }
    return states[value]


def stored_names(column: str) -> tuple[str, ...]:
    """The fields a column may be stored under: its short name first, then its own (an older
    layout's HASH); a column without a short name has only its own."""
    short = SHORT_FIELDS.get(column)
    return (column,) if short is None else (short, column)


def first_present(values: Sequence[Any]) -> str | None:
    """The first value of an HMGET of `stored_names` that is present, as text."""
    for value in values:
        if value is not None:
            return str(value)
    return None


def stored_columns(row: Mapping[str, str], job_id: str, queue: str) -> dict[str, str]:
    """A job HASH read directly (HGETALL) by column name (a short field wins over its older
    twin), with its absent columns at their defaults; `{}` for a missing job (every job stores
    `created_at_ms`)."""
    by_name: dict[str, str] = {}
    for field, value in row.items():
        column = COLUMNS_OF_SHORT.get(field)
        if column is not None:
            by_name[column] = value
        else:
            by_name.setdefault(field, value)
    created = by_name.get("created_at_ms")
    if created is None:
        return {}
    full = {"id": job_id, "queue": queue, **JOB_DEFAULTS}
    full.update(dict.fromkeys(CREATED_DEFAULTS, created))
    full.update(by_name)
    return full


def job_record(row: Mapping[str, str]) -> JobRecord:
    """A job HASH as a `JobRecord`."""
    progress = row.get("progress")
    return JobRecord(
        id=row["id"],
        run_id=row["run_id"],
        name=row["name"],
        queue=row["queue"],
        state=job_state(row["state"]),
        tenant_id=row.get("tenant_id"),
        idempotency_key=row["idempotency_key"],
        payload=row["payload"],
        priority=int(row["priority"]),
        attempt=int(row["attempt"]),
        max_attempts=int(row["max_attempts"]),
        dead_letter=row["dead_letter"] == "1",
        claims=int(row["claims"]),
        claimed_by=row.get("claimed_by"),
        lease_until_ms=_opt_int(row.get("lease_until_ms")),
        run_at_ms=int(row["run_at_ms"]),
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
        finished_at_ms=_opt_int(row.get("finished_at_ms")),
        last_error=row.get("last_error"),
        progress=None if progress is None else float(progress),
        enqueued_by=row.get("enqueued_by"),
        traceparent=row.get("traceparent"),
    )


def job_move(reply: Sequence[Any]) -> JobMove:
    """One job's answer of a move script (cancel, requeue, promote, remove) as a `JobMove`."""
    status = str(reply[0])
    if status == "missing":
        return JobMove("missing")
    if status == "finished":
        return JobMove("finished", state=str(reply[1]))
    if status == "live":
        return JobMove("live", state=str(reply[1]))
    if status == "duplicate":
        return JobMove("duplicate", holder=str(reply[1]) or None)
    fields = reply[-1]
    return JobMove("done", job_record(flat_hash(fields)) if fields else None)


def job_summary(fields: Sequence[Any]) -> JobSummary:
    """A job as a list shows it, from its HASH's `SUMMARY_FIELDS` (absent fields are `None`)."""
    row = dict(zip(SUMMARY_FIELDS, fields, strict=True))
    progress = row["progress"]
    return JobSummary(
        id=str(row["id"]),
        name=str(row["name"]),
        queue=str(row["queue"]),
        state=job_state(str(row["state"])),
        tenant_id=row["tenant_id"],
        priority=int(row["priority"]),
        attempt=int(row["attempt"]),
        max_attempts=int(row["max_attempts"]),
        run_at_ms=int(row["run_at_ms"]),
        created_at_ms=int(row["created_at_ms"]),
        updated_at_ms=int(row["updated_at_ms"]),
        finished_at_ms=_opt_int(row["finished_at_ms"]),
        claimed_by=row["claimed_by"],
        progress=None if progress is None else float(progress),
        last_error=row["last_error"],
    )


def attempt_errors(job_id: str, history: str | None) -> list[AttemptError]:
    """A job's field of its queue's errors HASH (one JSON object a line, oldest first)."""
    if not history:
        return []
    errors = []
    for line in history.split("\n"):
        entry = json.loads(line)
        worker = entry.get("worker")
        errors.append(
            AttemptError(
                job_id=job_id,
                attempt=int(entry["attempt"]),
                worker_id=None if worker is None else str(worker),
                at_ms=int(entry["at"]),
                text=str(entry["text"]),
            )
        )
    return errors
