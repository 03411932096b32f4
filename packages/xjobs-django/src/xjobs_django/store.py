"""The xjobs `App` one backend URL opens on the process's portal, shared by every thread's
backend instance: build a task's job row, enqueue it, read a job back."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

from xjobs import App
from xjobs.contract.driver import NewJob
from xjobs.declare.job import EnqueueOptions
from xjobs.enqueue.facade import JobsFacade
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES
from xjobs_django.call import TaskCall
from xjobs_django.job import task_job
from xjobs_django.options import BackendOptions
from xjobs_django.portal import Portal, portal
from xjobs_django.results import Snapshot

_lock = threading.Lock()


class Store:
    """One open xjobs `App` (no jobs of its own: it enqueues and reads) on a portal's loop."""

    def __init__(self, options: BackendOptions, on: Portal) -> None:
        self.options = options
        self.portal = on
        self._opening: asyncio.Future[App] | None = None
        self._facade: JobsFacade | None = None

    async def open(self) -> App:
        """The open app, opened by the first caller (on the portal's loop); later callers share it."""
        opening = self._opening
        if opening is None:
            opening = self._opening = asyncio.ensure_future(self._open())
        try:
            return await asyncio.shield(opening)
        except BaseException:
            if _failed(opening) and self._opening is opening:
                self._opening = None  # a failed open is tried again by the next call
            raise

    async def _open(self) -> App:
        app = App(self.options.url, backend_options=self.options.backend_options)
        await app.open()
        self._facade = JobsFacade(
            app.backend.jobs,
            app.clock,
            max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES,
            results=app.backend.results,
            observer=app.telemetry,
        )
        return app

    def build(
        self, call: TaskCall, *, queue: str, priority: int, run_at: datetime | None
    ) -> NewJob:
        """The job row of `call` (validated, keyed, attributed to the caller's actor), not yet
        written: its id is the task result's id from now on. The app must be open."""
        assert self._facade is not None, "Store.build before Store.open"
        options = EnqueueOptions(run_at=run_at, priority=priority)
        (row,) = self._facade.build(task_job(queue, self.options.max_attempts), [call], options)
        return row

    async def enqueue(self, row: NewJob) -> None:
        """Write the job row built by `build`."""
        app = await self.open()
        await app.backend.jobs.enqueue([row])

    async def snapshot(self, job_id: str) -> Snapshot | None:
        """What the backend holds of job `job_id` (`None`: no such job): one read while it waits
        or runs, and the result or the attempt errors once there are some."""
        app = await self.open()
        record = await app.backend.jobs.get(job_id)
        if record is None:
            return None
        result = None
        if record.state == "completed" and app.backend.results is not None:
            stored = await app.backend.results.read(job_id)
            result = stored.result if stored is not None else None
        errors = []
        if record.last_error is not None and app.backend.introspection is not None:
            errors = await app.backend.introspection.errors(job_id)
        return Snapshot(record, result, errors)

    @property
    def is_open(self) -> bool:
        """Whether the app is open (`build` may be called)."""
        return self._facade is not None

    async def close(self) -> None:
        """Close the app, if it was opened."""
        opening, self._opening = self._opening, None
        self._facade = None
        if opening is not None and opening.done() and not _failed(opening):
            await opening.result().close()


def _failed(opening: asyncio.Future[App]) -> bool:
    """Whether an open ended without an app (raised or was cancelled)."""
    return opening.done() and (opening.cancelled() or opening.exception() is not None)


def store_for(options: BackendOptions) -> Store:
    """The store of `options`' URL on this process's portal, made on first use."""
    on = portal()
    with _lock:
        found = on.shared.get(options.key)
        if not isinstance(found, Store):
            found = Store(options, on)
            on.shared[options.key] = found
            on.on_close(found.close)
        return found
