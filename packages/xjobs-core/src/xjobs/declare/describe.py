"""The JSON projection of a job or task handle, for manifests, the CLI and `--json`."""

from __future__ import annotations

from typing import Any

from xjobs.declare.job import JobHandle
from xjobs.declare.task import TaskHandle


def describe_job(handle: JobHandle[Any]) -> dict[str, Any]:
    """One job as plain JSON data; callables show only whether they are declared."""
    concurrency: dict[str, Any] | None = None
    if handle.concurrency is not None:
        concurrency = {
            "keyed": handle.concurrency.key is not None,
            "limit": handle.concurrency.limit,
            "when_busy": handle.concurrency.when_busy,
        }
    return {
        "concurrency": concurrency,
        "event_poll_ms": handle.event_poll_ms,
        "input_schema": handle.input_model.model_json_schema(),
        "kind": "job",
        "name": handle.name,
        "priority": handle.priority,
        "queue": handle.queue,
        "redacts": {
            "input": handle.redact.input is not None,
            "key": handle.redact.key is not None,
            "steps": handle.redact.steps is not None,
        },
        "redacts_input": handle.redact_input is not None,
        "retry": {
            "attempts": handle.retry.attempts,
            "base_ms": handle.retry.base_ms,
            "cap_ms": handle.retry.cap_ms,
            "dead_letter": handle.retry.dead_letter,
        },
        "step_timeout_ms": handle.step_timeout_ms,
        "tenant": "none" if handle.tenant.derive is None else "derived",
        "timeout_ms": handle.timeout_ms,
    }


def describe_task(handle: TaskHandle) -> dict[str, Any]:
    """One task as plain JSON data."""
    return {
        "catch_up": handle.catch_up,
        "cron": handle.cron,
        "job": handle.job.name,
        "kind": "task",
        "max_catch_up": handle.max_catch_up,
        "name": handle.name,
        "tz": handle.tz,
    }


def describe(jobs: dict[str, JobHandle[Any]], tasks: dict[str, TaskHandle]) -> dict[str, Any]:
    """Every job and task, each list sorted by name in code-point order."""
    return {
        "jobs": [describe_job(jobs[name]) for name in sorted(jobs)],
        "tasks": [describe_task(tasks[name]) for name in sorted(tasks)],
    }
