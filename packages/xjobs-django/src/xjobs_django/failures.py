"""A task's exception as xjobs stores it, and Django's `TaskError` read back from the stored text."""

from __future__ import annotations

import builtins
import json
import traceback

from django.tasks.base import TaskError

from xjobs import errors
from xjobs.run.settle import MAX_ERROR_CHARS

# The stored error is `TaskFailed: {json}` then xjobs' own frames, cut at MAX_ERROR_CHARS: the
# JSON head is kept well under it, the traceback's oldest frames dropped first.
_HEAD_CHARS = MAX_ERROR_CHARS - 600
_PREFIX = "TaskFailed: "


class TaskFailed(Exception):
    """A Django task raised: fail it at once (Django's tasks have no retries), keeping the
    exception's class path and traceback in the message."""

    terminal = True

    def __init__(self, exception_class_path: str, traceback_text: str) -> None:
        self.exception_class_path = exception_class_path
        self.traceback_text = traceback_text
        super().__init__(_encode(exception_class_path, traceback_text))

    @classmethod
    def of(cls, error: BaseException) -> TaskFailed:
        """The failure of `error`, raised by a task: its class path and its whole traceback."""
        kind = type(error)
        return cls(
            f"{kind.__module__}.{kind.__qualname__}", "".join(traceback.format_exception(error))
        )


def _encode(path: str, text: str) -> str:
    encoded = json.dumps({"exception_class_path": path, "traceback": text})
    while len(encoded) > _HEAD_CHARS and text:
        text = text[len(text) // 4 :]  # keep the newest frames and the exception's line
        encoded = json.dumps({"exception_class_path": path, "traceback": "…" + text})
    return encoded


def task_error(stored: str) -> TaskError | None:
    """The `TaskError` a stored error text holds, or `None` when it is not a task's own exception
    (a lost lease, a drain's interruption)."""
    head = stored.split("\n", 1)[0]
    if not head.startswith(_PREFIX):
        return None
    try:
        found = json.loads(head[len(_PREFIX) :])
        return TaskError(
            exception_class_path=str(found["exception_class_path"]),
            traceback=str(found["traceback"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def infrastructure_error(stored: str) -> TaskError:
    """A stored error that is not a task's own (a lapsed lease, an interruption) as a `TaskError`:
    its class found in `xjobs.errors` or the builtins (else `xjobs.errors.XJobsError`), its text
    as the traceback."""
    head = stored.split("\n", 1)[0]
    name = head.split(": ", 1)[0] if ": " in head else ""
    if name.isidentifier() and isinstance(getattr(errors, name, None), type):
        path = f"xjobs.errors.{name}"
    elif name.isidentifier() and isinstance(getattr(builtins, name, None), type):
        path = f"builtins.{name}"
    else:
        path = "xjobs.errors.XJobsError"
    return TaskError(exception_class_path=path, traceback=stored)
