"""A worker for a Django project's tasks: the `django_task` job registered on the backend's URL,
served over the backend's queues in this process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, DEFAULT_TASK_QUEUE_NAME, task_backends
from django.tasks.exceptions import InvalidTaskBackend

from xjobs import App, Clock, WorkerStats
from xjobs.errors import OptionInvalidError
from xjobs.roles.worker_options import WorkerKwargs
from xjobs_django.backend import XJobsBackend
from xjobs_django.job import task_job


def xjobs_backend(alias: str = DEFAULT_TASK_BACKEND_ALIAS) -> XJobsBackend:
    """The `TASKS[alias]` backend, refused (`XJOBS_OPTION_INVALID`) unless it is an `XJobsBackend`."""
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise OptionInvalidError(f"TASKS has no backend {alias!r}: {exc}") from exc
    if not isinstance(backend, XJobsBackend):
        raise OptionInvalidError(
            f'TASKS["{alias}"] is {type(backend).__name__}, not xjobs_django.XJobsBackend'
        )
    return backend


def backend_queues(alias: str = DEFAULT_TASK_BACKEND_ALIAS) -> list[str]:
    """The queues `TASKS[alias]["QUEUES"]` names, sorted (`default` when it names none)."""
    return sorted(xjobs_backend(alias).queues) or [DEFAULT_TASK_QUEUE_NAME]


def worker_app(alias: str = DEFAULT_TASK_BACKEND_ALIAS, *, clock: Clock | None = None) -> App:
    """An `App` (not yet open) on `TASKS[alias]`'s URL with the `django_task` job registered, and
    the retention purge's job and cron task (on by default): what a worker runs, here or under
    `xjobs.asgi.XJobsLifespan(..., worker=True)`, and what `xjobs_scheduler` fires."""
    backend = xjobs_backend(alias)
    options = backend.xjobs
    handle = task_job(backend_queues(alias)[0], options.max_attempts)
    return App(options.url, jobs=[handle], backend_options=options.backend_options, clock=clock)


async def run_worker(
    alias: str = DEFAULT_TASK_BACKEND_ALIAS,
    *,
    queues: Sequence[str] | None = None,
    until_idle: bool = False,
    handle_signals: bool | None = None,
    **options: Unpack[WorkerKwargs],
) -> WorkerStats:
    """Run a worker for `TASKS[alias]` over `queues` (default: the backend's) until it is idle
    (`until_idle=True`), stopped, or SIGTERM drains it; `options` are `App.run_worker`'s."""
    served = list(queues) if queues else backend_queues(alias)
    async with worker_app(alias) as app:
        return await app.run_worker(
            queues=served, until_idle=until_idle, handle_signals=handle_signals, **options
        )
