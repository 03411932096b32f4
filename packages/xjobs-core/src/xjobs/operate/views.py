"""The worker and task rows an operator lists: registry rows with their running jobs, tasks with their fires."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from xjobs.contract.introspection import JobSummary
from xjobs.contract.stores import TaskFire, WorkerInfo
from xjobs.declare.task import TaskHandle


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A live worker process and the ids of the jobs it runs now."""

    info: WorkerInfo
    running: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TaskView:
    """A registered task: its schedule, next occurrence, last dispatched fire and pause."""

    name: str
    job: str
    cron: str
    tz: str
    next_ms: int
    last_fire: TaskFire | None
    paused: bool


def worker_views(infos: Iterable[WorkerInfo], running: Iterable[JobSummary]) -> list[WorkerView]:
    """Each worker row with the running jobs it holds."""
    by_worker: dict[str, list[str]] = {}
    for job in running:
        if job.claimed_by is not None:
            by_worker.setdefault(job.claimed_by, []).append(job.id)
    return [WorkerView(info, tuple(sorted(by_worker.get(info.id, ())))) for info in infos]


def task_views(
    tasks: Mapping[str, TaskHandle],
    fires: Mapping[str, TaskFire],
    paused: set[str],
    now_ms: int,
) -> list[TaskView]:
    """Each registered task, by name."""
    views = []
    for name in sorted(tasks):
        task = tasks[name]
        following = task.next_occurrence(datetime.fromtimestamp(now_ms / 1000, UTC))
        views.append(
            TaskView(
                name=name,
                job=task.job.name,
                cron=task.cron,
                tz=task.tz,
                next_ms=int(following.timestamp() * 1000),
                last_fire=fires.get(name),
                paused=name in paused,
            )
        )
    return views
