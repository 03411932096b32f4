"""`XJobsBackend`: Django's task backend (`TASKS[…]["BACKEND"]`) over an xjobs backend URL."""

from __future__ import annotations

import secrets
from typing import Any, ParamSpec, TypeVar

from django.db import connections, transaction
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from xjobs.contract.driver import EnqueueResult
from xjobs.errors import QueueNameInvalidError
from xjobs.names import validate_queue
from xjobs.observe.telemetry import Telemetry
from xjobs_django.call import TaskCall
from xjobs_django.flow import flow_token
from xjobs_django.job import JOB_NAME
from xjobs_django.options import BackendOptions, read_options
from xjobs_django.priority import xjobs_priority
from xjobs_django.results import Snapshot, task_result
from xjobs_django.store import Built, Store, store_for

P = ParamSpec("P")
R = TypeVar("R")


class XJobsBackend(BaseTaskBackend):
    """Enqueues any `@task` function (plain or `async def`) as an xjobs `django_task` job on the
    task's queue, and reads its result back; `manage.py xjobs_worker` runs them.

    A sync `enqueue` waits for the commit of the current transaction of `OPTIONS["database"]`
    (`transaction.on_commit`): a rolled-back enqueue writes nothing. With `OPTIONS["outbox"]` it
    is staged on that transaction's own connection instead, durable exactly when the commit is.
    `aenqueue` writes at once.
    Both go through the xjobs jobs facade: telemetry applies, and a task `OPTIONS["flow"]` names
    is debounced or throttled on its arguments (its result then names the job it joined).
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

    @property
    def telemetry(self) -> Telemetry:
        """The telemetry of the xjobs App this backend enqueues through: turn its metrics or
        tracing on (`.enable_metrics(registry=...)`, e.g. in an `AppConfig.ready`) and every
        enqueue counts in `xjobs_jobs_enqueued_total` and opens its send span."""
        return self._store().app.telemetry

    # -- enqueue -------------------------------------------------------------------------------

    def _store(self) -> Store:
        return store_for(self.xjobs)

    def _prepare(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any], store: Store
    ) -> tuple[TaskResult[P, R], Built]:
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
        flow = self.xjobs.flow.get(task.module_path)
        call = TaskCall(
            task=task.module_path,
            args=result.args,
            kwargs=result.kwargs,
            backend=self.alias,
            priority=task.priority,
            run_after=task.run_after,
            token=(
                secrets.token_hex(16)
                if flow is None
                else flow_token(task.module_path, result.args, result.kwargs)
            ),
        )
        built = store.build(
            call,
            queue=task.queue_name,
            priority=xjobs_priority(task.priority),
            run_at=task.run_after,
            flow=flow,
        )
        object.__setattr__(result, "id", built.row.id)
        return result, built

    def _enqueued(self, result: TaskResult[..., Any], answer: EnqueueResult) -> None:
        # a flow window may have folded the call into a live job: the result names that job
        object.__setattr__(result, "id", answer.job_id)
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
        result, built = self._prepare(task, args, kwargs, store)
        database = self.xjobs.database

        def publish() -> None:
            self._enqueued(result, store.portal.run(store.enqueue(built)))

        if database is None:
            publish()
        elif self._stages(built, database):
            connection = connections[database]
            connection.ensure_connection()
            store.stage(built, connection.connection)
            answer = EnqueueResult(built.row.id, built.row.run_id, deduped=False)
            transaction.on_commit(lambda: self._enqueued(result, answer), using=database)
        else:
            transaction.on_commit(publish, using=database)
        return result

    def _stages(self, built: Built, database: str) -> bool:
        """Whether an enqueue is staged in the transaction it runs in: with `OPTIONS["outbox"]`,
        inside one, and for a task with no flow window (which acts on jobs already enqueued)."""
        flow = built.options.debounce is not None or built.options.throttle is not None
        return self.xjobs.outbox and not flow and connections[database].in_atomic_block

    async def aenqueue(
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue `task` now (async code runs outside Django's transactions)."""
        store = self._store()
        if not store.is_open:
            await store.portal.arun(store.open())
        result, built = self._prepare(task, args, kwargs, store)
        self._enqueued(result, await store.portal.arun(store.enqueue(built)))
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
