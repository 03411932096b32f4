"""The JSON shape (version 1) of each record the operator surfaces print (the CLI's `--json`, the
dashboard, the MCP server), and the versioned document that carries them.

Instants are integer epoch milliseconds in fields ending `_ms` (the unit xjobs stores); the text
output turns them into ages and ISO times. A field is never dropped within a version: a new one
may be added, a removal or a change of meaning is version 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from xjobs.contract.driver import JobRecord
from xjobs.contract.introspection import (
    COUNT_CAP,
    AttemptError,
    JobFilter,
    JobSummary,
    Pause,
    QueueCounts,
)
from xjobs.contract.stores import StepRecord, TaskFire
from xjobs.operate.views import TaskView, WorkerView

SHAPE_VERSION = 1

Json = dict[str, Any]


def document(kind: str, body: Mapping[str, Any]) -> Json:
    """The JSON document of one command: its shape version, its kind, then its body."""
    return {"version": SHAPE_VERSION, "kind": kind, **body}


def where(f: JobFilter) -> Json:
    """A filter: the states (empty: any) and the other fields it names."""
    return {
        "states": list(f.states),
        "queue": f.queue,
        "name": f.name,
        "tenant": f.tenant,
        "created_after_ms": f.created_after_ms,
        "created_before_ms": f.created_before_ms,
    }


def job_summary(j: JobSummary) -> Json:
    """One row of a list (no payload)."""
    return {
        "id": j.id,
        "name": j.name,
        "queue": j.queue,
        "state": j.state,
        "tenant": j.tenant_id,
        "priority": j.priority,
        "attempt": j.attempt,
        "max_attempts": j.max_attempts,
        "run_at_ms": j.run_at_ms,
        "created_at_ms": j.created_at_ms,
        "updated_at_ms": j.updated_at_ms,
        "finished_at_ms": j.finished_at_ms,
        "claimed_by": j.claimed_by,
        "progress": j.progress,
        "last_error": j.last_error,
    }


def job_record(r: JobRecord) -> Json:
    """A whole job record but its payload (which `jobs.show` prints as `input`, redacted)."""
    return {
        "id": r.id,
        "run_id": r.run_id,
        "name": r.name,
        "queue": r.queue,
        "state": r.state,
        "tenant": r.tenant_id,
        "idempotency_key": r.idempotency_key,
        "priority": r.priority,
        "attempt": r.attempt,
        "max_attempts": r.max_attempts,
        "dead_letter": r.dead_letter,
        "claims": r.claims,
        "claimed_by": r.claimed_by,
        "lease_until_ms": r.lease_until_ms,
        "run_at_ms": r.run_at_ms,
        "created_at_ms": r.created_at_ms,
        "updated_at_ms": r.updated_at_ms,
        "finished_at_ms": r.finished_at_ms,
        "progress": r.progress,
        "last_error": r.last_error,
        "enqueued_by": r.enqueued_by,
        "traceparent": r.traceparent,
    }


def _stored_json(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def step(s: StepRecord) -> Json:
    """A step of the run: its status, its result as JSON, the error it raised."""
    return {
        "position": s.position,
        "name": s.name,
        "status": s.status,
        "result": _stored_json(s.result),
        "error": s.error,
        "created_at_ms": s.created_at_ms,
    }


def attempt_error(e: AttemptError) -> Json:
    """The error one attempt ended with."""
    return {
        "attempt": e.attempt,
        "at_ms": e.at_ms,
        "worker_id": e.worker_id,
        "error_class": e.error_class,
        "message": e.message,
        "traceback": e.traceback,
    }


def oldest_ready_age_s(q: QueueCounts, now_ms: int) -> float | None:
    """How long the queue's longest-due ready job has waited, in seconds (`None`: none is due)."""
    return None if q.oldest_ready_ms is None else max(now_ms - q.oldest_ready_ms, 0) / 1000


def queue_counts(q: QueueCounts, now_ms: int) -> Json:
    """A queue's counts (each at most `COUNT_CAP`, read "at least"), its oldest due job, its pause."""
    return {
        "queue": q.queue,
        "ready": q.ready,
        "scheduled": q.scheduled,
        "running": q.running,
        "waiting": q.waiting,
        "dead": q.dead,
        "failed": q.failed,
        "oldest_ready_ms": q.oldest_ready_ms,
        "oldest_ready_age_s": oldest_ready_age_s(q, now_ms),
        "paused": q.paused,
    }


def capped(count: int) -> bool:
    """Whether a queue count reached the scan's cap (the true count may be higher)."""
    return count >= COUNT_CAP


def pause(p: Pause) -> Json:
    """A pause row."""
    return {"kind": p.kind, "name": p.name, "paused_at_ms": p.paused_at_ms}


def worker(v: WorkerView) -> Json:
    """A live worker process and the jobs it runs now."""
    info = v.info
    return {
        "id": info.id,
        "host": info.host,
        "pid": info.pid,
        "queues": list(info.queues),
        "started_at_ms": info.started_at_ms,
        "last_seen_ms": info.last_seen_ms,
        "running": list(v.running),
    }


def task_fire(f: TaskFire | None) -> Json | None:
    """A task's last dispatched occurrence, if any."""
    if f is None:
        return None
    return {"occurrence_ms": f.occurrence_ms, "job_id": f.job_id, "fired_at_ms": f.fired_at_ms}


def task(v: TaskView) -> Json:
    """A registered task: its job, schedule, next occurrence, last fire and pause."""
    return {
        "name": v.name,
        "job": v.job,
        "cron": v.cron,
        "tz": v.tz,
        "next_ms": v.next_ms,
        "last_fire": task_fire(v.last_fire),
        "paused": v.paused,
    }
