"""`django_task`: the one xjobs job every Django task is enqueued as, on the task's own queue."""

from __future__ import annotations

import functools

from xjobs import JobHandle, Retry, job
from xjobs_django.call import TaskCall
from xjobs_django.execute import run_call

JOB_NAME = "django_task"


@functools.cache
def task_job(queue: str, max_attempts: int) -> JobHandle[TaskCall]:
    """The `django_task` job on `queue`: a plain `def` body (run on a thread of its own), keyed
    by each call's token, started at most `max_attempts` times (a task that raises fails at once)."""
    return job(
        run_call,
        name=JOB_NAME,
        tenant="none",
        idempotency_key=lambda call: call.token,
        queue=queue,
        retry=Retry(attempts=max_attempts),
        input_model=TaskCall,
    )
