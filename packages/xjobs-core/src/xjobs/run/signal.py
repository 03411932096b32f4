"""The signal one run is cancelled by: the first reason wins, and cancelling it cancels the body's task."""

from __future__ import annotations

import asyncio

from xjobs.errors import XJobsError


class RunSignal:
    """Owned by the worker for one run; `abort(reason)` cancels the body once, with the first reason."""

    __slots__ = ("_reason", "_task")

    def __init__(self) -> None:
        self._reason: XJobsError | None = None
        self._task: asyncio.Task[object] | None = None

    @property
    def reason(self) -> XJobsError | None:
        """Why the run was aborted (the first reason), or `None` while it is not."""
        return self._reason

    @property
    def aborted(self) -> bool:
        """Whether the run was aborted."""
        return self._reason is not None

    def attach(self, task: asyncio.Task[object]) -> None:
        """Bind the body's task; a reason that arrived first cancels it at once."""
        self._task = task
        if self._reason is not None:
            task.cancel(self._reason.code)

    def abort(self, reason: XJobsError) -> None:
        """Cancel the run for `reason`, unless it was already aborted."""
        if self._reason is not None:
            return
        self._reason = reason
        if self._task is not None and not self._task.done():
            self._task.cancel(reason.code)
