"""A stored xjobs job read back as Django's `TaskResult`: status, times, errors, return value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from django.conf import settings
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.utils import timezone

from xjobs.contract.driver import JobRecord, JobState
from xjobs.contract.introspection import AttemptError
from xjobs_django.call import TaskCall
from xjobs_django.failures import infrastructure_error, task_error

STATUS: Final[dict[JobState, TaskResultStatus]] = {
    "ready": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    # a plain `def` body never parks; a parked job is still between its start and its end
    "waiting": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}
UNKNOWN_WORKER = "unknown"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the store holds of one job: its record, its result JSON (completed), its attempt errors."""

    record: JobRecord
    result: str | None
    errors: list[AttemptError]


def _time(ms: int | None) -> datetime | None:
    if ms is None:
        return None
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return at if settings.USE_TZ else timezone.make_naive(at)


def _last_attempted_ms(record: JobRecord, errors: list[AttemptError]) -> int | None:
    """The last attempt's latest known time (xjobs keeps no start time): its heartbeat while it
    runs, its end once finished, its error while a retry waits."""
    if record.attempt == 0:
        return None
    if record.state == "running":
        return record.updated_at_ms
    if record.finished_at_ms is not None:
        return record.finished_at_ms
    return errors[-1].at_ms if errors else record.updated_at_ms


def _worker_ids(record: JobRecord, errors: list[AttemptError]) -> list[str]:
    """One worker id per attempt (so `TaskResult.attempts` is the attempt count): the worker an
    attempt's error names, the claiming worker for the last attempt, else UNKNOWN_WORKER."""
    named = {e.attempt: e.worker_id for e in errors if e.worker_id}
    last = record.claimed_by
    return [
        named.get(n) or (last if n == record.attempt and last else UNKNOWN_WORKER)
        for n in range(1, record.attempt + 1)
    ]


def _errors(record: JobRecord, errors: list[AttemptError]) -> list[TaskError]:
    """The task's own exceptions, one per failed attempt; a job that failed without one (its
    lease lapsed on its final attempt) shows the error xjobs recorded."""
    found = [e for e in (task_error(a.text) for a in errors) if e is not None]
    if not found and STATUS[record.state] == TaskResultStatus.FAILED:
        found.append(infrastructure_error(record.last_error or "the job was cancelled"))
    return found


def task_result(snapshot: Snapshot) -> TaskResult[..., Any]:
    """Django's `TaskResult` of a stored `django_task` job."""
    record = snapshot.record
    call = TaskCall.model_validate_json(record.payload)
    status = STATUS[record.state]
    attempted = _time(_last_attempted_ms(record, snapshot.errors))
    result: TaskResult[..., Any] = TaskResult(
        task=call.django_task(record.queue),
        id=record.id,
        status=status,
        enqueued_at=_time(record.created_at_ms),
        started_at=attempted,
        finished_at=_time(record.finished_at_ms),
        last_attempted_at=attempted,
        args=call.args,
        kwargs=call.kwargs,
        backend=call.backend,
        errors=_errors(record, snapshot.errors),
        worker_ids=_worker_ids(record, snapshot.errors),
    )
    if status == TaskResultStatus.SUCCESSFUL and snapshot.result is not None:
        object.__setattr__(result, "_return_value", json.loads(snapshot.result))
    return result
