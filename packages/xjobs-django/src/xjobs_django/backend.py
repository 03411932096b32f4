"""`XJobsBackend`: Django's task backend (`TASKS[…]["BACKEND"]`) over an xjobs backend URL."""

from __future__ import annotations

import secrets
from typing import Any, ParamSpec, TypeVar

from django.db import transaction
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from xjobs.contract.driver import NewJob
from xjobs.errors import QueueNameInvalidError
from xjobs.names import validate_queue
from xjobs_django.call import TaskCall
from xjobs_django.job import JOB_NAME
from xjobs_django.options import BackendOptions, read_options
from xjobs_django.priority import xjobs_priority
from xjobs_django.results import Snapshot, task_result
from xjobs_django.store import Store, store_for

P = ParamSpec("P")
R = TypeVar("R")


class XJobsBackend(BaseTaskBackend):
    """Enqueues any `@task` function (plain or `async def`) as an xjobs `django_task` job on the
    task's queue, and reads its result back; `manage.py xjobs_worker` runs them.

    A sync `enqueue` waits for the commit of the current transaction of `OPTIONS["database"]`
    (`transaction.on_commit`): a rolled-back enqueue writes nothing. `aenqueue` writes at once.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.xjobs: BackendOptions = read_options(alias, self.options)
        for queue in sorted(self.queues):
            validate_queue(queue)

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks, then the queue name as xjobs takes it."""
        super().validate_task(task)
        try:
            validate_queue(task.queue_name)
        except QueueNameInvalidError as exc:
            raise InvalidTask(exc.message) from exc

    # -- enqueue -------------------------------------------------------------------------------

    def _store(self) -> Store:
        return store_for(self.xjobs)

    def _prepare(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any], store: Store
    ) -> tuple[TaskResult[P, R], NewJob]:
        """The task's result (READY, not yet enqueued) and its job row; bad arguments raise here,
        before anything is written."""
        self.validate_task(task)
        result: TaskResult[P, R] = TaskResult(
            task=task,
            id="",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )  # its args and kwargs are normalized to JSON here (TypeError otherwise)
        call = TaskCall(
            task=task.module_path,
            args=result.args,
            kwargs=result.kwargs,
            backend=self.alias,
            priority=task.priority,
            run_after=task.run_after,
            token=secrets.token_hex(16),
        )
        row = store.build(
            call,
            queue=task.queue_name,
            priority=xjobs_priority(task.priority),
            run_at=task.run_after,
        )
        object.__setattr__(result, "id", row.id)
        return result, row

    def _enqueued(self, result: TaskResult[..., Any]) -> None:
        object.__setattr__(result, "enqueued_at", timezone.now())
        task_enqueued.send(type(self), task_result=result)

    def enqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue `task` with `args` and `kwargs` once the current transaction commits (at once
        outside one); the result's id is the xjobs job's id from the start."""
        store = self._store()
        if not store.is_open:
            store.portal.run(store.open())
        result, row = self._prepare(task, args, kwargs, store)

        def publish() -> None:
            store.portal.run(store.enqueue(row))
            self._enqueued(result)

        if self.xjobs.database is None:
            publish()
        else:
            transaction.on_commit(publish, using=self.xjobs.database)
        return result

    async def aenqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue `task` now (async code runs outside Django's transactions)."""
        store = self._store()
        if not store.is_open:
            await store.portal.arun(store.open())
        result, row = self._prepare(task, args, kwargs, store)
        await store.portal.arun(store.enqueue(row))
        self._enqueued(result)
        return result

    # -- results -------------------------------------------------------------------------------

    def _answer(self, result_id: str, found: Snapshot | None) -> TaskResult[..., Any]:
        if found is None or found.record.name != JOB_NAME:
            raise TaskResultDoesNotExist(result_id)
        return task_result(found)

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """The task result `result_id` as stored now; `TaskResultDoesNotExist` for an unknown id."""
        store = self._store()
        return self._answer(result_id, store.portal.run(store.snapshot(result_id)))

    async def aget_result(self, result_id: str) -> TaskResult[..., Any]:
        """See `get_result`."""
        store = self._store()
        return self._answer(result_id, await store.portal.arun(store.snapshot(result_id)))
