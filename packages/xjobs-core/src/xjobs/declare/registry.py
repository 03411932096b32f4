"""Registration: stamps job and task names from module attributes, refuses duplicates, lists by code point."""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType
from typing import Any, TypeVar

from xjobs.declare.job import JobHandle
from xjobs.declare.task import TaskHandle
from xjobs.errors import DeclarationInvalidError, JobDuplicateError, JobNotRegisteredError

H = TypeVar("H", JobHandle[Any], TaskHandle)


def _exports(source: object, kind: type[H]) -> list[tuple[str | None, H]]:
    if isinstance(source, kind):
        return [(None, source)]
    if isinstance(source, ModuleType):
        return [(attr, value) for attr, value in vars(source).items() if isinstance(value, kind)]
    raise DeclarationInvalidError(f"expected a module or a {kind.__name__}, got {source!r}")


def _register(sources: Iterable[object], kind: type[H], what: str) -> dict[str, H]:
    found: dict[str, H] = {}
    # Modules first, so an export name is stamped before a handle passed on its own falls back
    # to its function's name: the order of `jobs=[...]` never changes a name.
    ordered = sorted(sources, key=lambda s: not isinstance(s, ModuleType))
    for source in ordered:
        for attr, handle in _exports(source, kind):
            if isinstance(handle, JobHandle):
                refuse_hand_built(handle)
            if handle.declared_name is None:
                handle.stamp(attr if attr is not None else handle.name)
            name = handle.name
            other = found.get(name)
            if other is not None and other is not handle:
                raise JobDuplicateError(f"two different {what}s are registered as {name!r}")
            found[name] = handle
    return {name: found[name] for name in sorted(found)}


def refuse_hand_built(handle: JobHandle[Any]) -> None:
    """`DeclarationInvalidError` for a `JobHandle` that `job()` did not build: its checks never ran."""
    if not handle.built:
        raise DeclarationInvalidError(
            f"job handle {handle.name!r} was not built by job(): declare it with @job(...)"
        )


class Registry:
    """The jobs and tasks one app runs, by name, sorted by code point."""

    def __init__(self, jobs: Iterable[object] = (), tasks: Iterable[object] = ()) -> None:
        self.jobs: dict[str, JobHandle[Any]] = _register(jobs, JobHandle, "job")
        self.tasks: dict[str, TaskHandle] = _register(tasks, TaskHandle, "task")
        for task in self.tasks.values():
            refuse_hand_built(task.job)
            known = self.jobs.get(task.job.name)
            if known is None:
                self.jobs = dict(sorted({**self.jobs, task.job.name: task.job}.items()))
            elif known is not task.job:
                raise JobDuplicateError(
                    f"task {task.name!r} fires a job named {task.job.name!r} that is not the registered one"
                )

    def job(self, name: str) -> JobHandle[Any]:
        """The registered job called `name`."""
        handle = self.jobs.get(name)
        if handle is None:
            raise JobNotRegisteredError(
                f"no job named {name!r} is registered; known: {', '.join(self.jobs) or 'none'}"
            )
        return handle

    def owns(self, handle: JobHandle[Any]) -> bool:
        """Whether `handle` is the very job registered under its name (not a namesake)."""
        return self.jobs.get(handle.name) is handle

    def queues(self) -> list[str]:
        """Every queue a registered job enqueues into, sorted."""
        return sorted({handle.queue for handle in self.jobs.values()})
