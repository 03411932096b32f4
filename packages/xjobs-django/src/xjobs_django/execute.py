"""The body of the `django_task` job: one Django task run on its worker thread, the way a request
is served — stale database connections closed around it, Django's task signals sent."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db import close_old_connections, connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

from xjobs import SyncJobContext
from xjobs_django.call import TaskCall
from xjobs_django.failures import TaskFailed


def _ended(
    running: TaskResult[..., Any],
    status: TaskResultStatus,
    errors: list[TaskError],
    value: object = None,
) -> TaskResult[..., Any]:
    """`running` as it ends: its status, finish time, errors and return value."""
    ended = dataclasses.replace(running, status=status, finished_at=timezone.now(), errors=errors)
    object.__setattr__(ended, "_return_value", value)
    return ended


def _run(ctx: SyncJobContext, call: TaskCall) -> object:
    backend = task_backends[call.backend]
    # the result as stored while it runs: its attempt count is the context's `attempt`
    running = backend.get_result(ctx.job_id)
    task = running.task
    sender = type(backend)
    task_started.send(sender=sender, task_result=running)
    try:
        if task.takes_context:
            raw = task.call(TaskContext(task_result=running), *call.args, **call.kwargs)
        else:
            raw = task.call(*call.args, **call.kwargs)
        value = normalize_json(raw)
    except Exception as exc:
        failure = TaskFailed.of(exc)
        error = TaskError(
            exception_class_path=failure.exception_class_path, traceback=failure.traceback_text
        )
        ended = _ended(running, TaskResultStatus.FAILED, [*running.errors, error])
        task_finished.send(sender=sender, task_result=ended)
        raise failure from exc
    task_finished.send(
        sender=sender,
        task_result=_ended(running, TaskResultStatus.SUCCESSFUL, running.errors, value),
    )
    return value


def run_call(ctx: SyncJobContext, call: TaskCall) -> object:
    """Run the Django task `call` names with its arguments (`TaskContext` first for a
    `takes_context` task; an `async def` task on a loop of this thread's own, as `Task.call` does)
    and answer its JSON return value. An exception fails the task for good as `TaskFailed`.

    Each task runs on a thread of its own, so the connections it opened are closed when it ends;
    the stale ones are closed before it starts, as Django does around each request."""
    close_old_connections()
    try:
        return _run(ctx, call)
    finally:
        connections.close_all()
