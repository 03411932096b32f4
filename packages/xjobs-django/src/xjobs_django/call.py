"""`TaskCall`: the input of the one xjobs job behind every Django task — which task, its
arguments, and what Django enqueued it with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.tasks import Task
from django.utils.module_loading import import_string
from pydantic import BaseModel, ConfigDict


class TaskCall(BaseModel):
    """One enqueue of a Django task, as stored: the task's import path, its JSON arguments, the
    backend alias and priority it was enqueued with, and a token that makes it its own job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str
    priority: int
    run_after: datetime | None = None
    # Django tasks are never deduplicated: each enqueue is a job of its own.
    token: str

    def django_task(self, queue: str) -> Task[..., Any]:
        """The `Task` this call enqueued, imported by its path, with the options it was enqueued with."""
        found = import_string(self.task)
        if not isinstance(found, Task):
            raise ValueError(f"Expected {self.task!r} to point to a Task instance.")
        return found.using(
            priority=self.priority,
            queue_name=queue,
            run_after=self.run_after,
            backend=self.backend,
        )
