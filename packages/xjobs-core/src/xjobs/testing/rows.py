"""Row builders for tests that talk to a store directly: a `NewJob`, a step record, an event wait."""

from __future__ import annotations

from typing import Any

from xjobs.contract.driver import ClaimedJob, NewJob
from xjobs.contract.stores import EventWait, StepRecord
from xjobs.ids import new_id


def new_job(*, name: str = "test_job", queue: str = "default", **overrides: Any) -> NewJob:
    """A fresh row (new ids, a unique idempotency key, a small payload); every column may be overridden."""
    values: dict[str, Any] = {
        "id": new_id(),
        "run_id": new_id(),
        "name": name,
        "queue": queue,
        "tenant_id": None,
        "idempotency_key": new_id(),
        "payload": '{"n": 1}',
        "priority": 0,
        "run_at_ms": None,
        "max_attempts": 3,
        "dead_letter": True,
        "enqueued_by": None,
        "traceparent": None,
    }
    values.update(overrides)
    return NewJob(**values)


def step_record(job: ClaimedJob, name: str = "charge", **overrides: Any) -> StepRecord:
    """A done step at position 0 of the claimed job's run; every field may be overridden."""
    values: dict[str, Any] = {
        "run_id": job.run_id,
        "name": name,
        "status": "done",
        "result": '{"charge": "ch_1"}',
        "error": None,
        "position": 0,
        "created_at_ms": 1_000,
    }
    values.update(overrides)
    return StepRecord(**values)


def event_wait(job: ClaimedJob, **overrides: Any) -> EventWait:
    """The claimed job's wait for `order.paid` with an empty match, since 0 and without deadline."""
    values: dict[str, Any] = {
        "job_id": job.id,
        "run_id": job.run_id,
        "queue": job.queue,
        "step": "paid",
        "event": "order.paid",
        "match": "{}",
        "since_ms": 0,
        "deadline_ms": None,
    }
    values.update(overrides)
    return EventWait(**values)
