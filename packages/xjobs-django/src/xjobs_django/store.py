"""The xjobs `App` one backend URL opens on the process's portal, shared by every thread's
backend instance: build a task's job row, enqueue it through the jobs facade (flow control and
telemetry apply), read a job back."""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from xjobs import App, JobHandle
from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.declare.job import EnqueueOptions
from xjobs.enqueue.facade import JobsFacade
from xjobs.enqueue.flow import resolve_flow
from xjobs.errors import OutboxConnectionInvalidError
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES
from xjobs_django.call import TaskCall
from xjobs_django.job import task_job
from xjobs_django.options import BackendOptions
from xjobs_django.portal import Portal, portal
from xjobs_django.results import Snapshot
from xjobs_django.sqlite_file import shares_django_file

_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Built:
    """A task's job row, not yet written, with the job and the options it is enqueued with."""

    row: NewJob
    handle: JobHandle[Any]
    options: EnqueueOptions


class Store:
    """One open xjobs `App` (no jobs of its own: it enqueues and reads) on a portal's loop."""

    def __init__(self, options: BackendOptions, on: Portal) -> None:
        self.options = options
        self.portal = on
        # built (not opened) at once, so its telemetry can be turned on before the first enqueue
        self.app = App(options.url, backend_options=enqueue_backend_options(options))
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
        app = self.app
        await app.open()
        self._facade = JobsFacade(
            app.backend.jobs,
            app.clock,
            max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES,
            outbox=app.outbox_backend.outbox,
            results=app.backend.results,
            observer=app.telemetry,
        )
        return app

    def build(
        self,
        call: TaskCall,
        *,
        queue: str,
        priority: int,
        run_at: datetime | None,
        flow: EnqueueOptions | None = None,
    ) -> Built:
        """The job row of `call` (validated, keyed, attributed to the caller's actor), not yet
        written: its id is the task result's id unless a `flow` window folds it into a live job.
        A window the call cannot take (debounce with `run_after`) is refused here. The app must
        be open."""
        assert self._facade is not None, "Store.build before Store.open"
        options = EnqueueOptions(run_at=run_at, priority=priority)
        if flow is not None:
            options = replace(options, debounce=flow.debounce, throttle=flow.throttle)
        resolve_flow(options)
        handle = task_job(queue, self.options.max_attempts)
        (row,) = self._facade.build(handle, [call], options)
        return Built(row, handle, options)

    async def enqueue(self, built: Built) -> EnqueueResult:
        """Write the job row built by `build` through the facade: the job it is, or the live job
        a flow window folded it into."""
        await self.open()
        assert self._facade is not None
        (result,) = await self._facade.enqueue_built(built.handle, [built.row], built.options)
        return result

    def stage(self, built: Built, conn: object) -> None:
        """Stage the job row built by `build` on the caller's own database connection (Django's,
        inside its transaction) through the app's outbox: it commits or rolls back with it."""
        assert self._facade is not None, "Store.stage before Store.open"
        staged = self._facade.stage_built(built.handle, conn, [built.row], built.options)
        if inspect.isawaitable(staged):  # an async driver connection: never Django's own
            _close(staged)
            raise OutboxConnectionInvalidError(
                "Django's database connection is synchronous; this outbox staged asynchronously"
            )

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


def enqueue_backend_options(options: BackendOptions) -> dict[str, Any]:
    """The backend options the enqueueing App opens with. On Django's own SQLite file it installs
    nothing: an install is a write transaction, and the first enqueue may come inside a Django
    transaction that already holds the file's write lock, which the open would wait on from
    another thread of the same process. `xjobs_install` (or any worker) installs the schema."""
    extra = dict(options.backend_options)
    if options.database is not None and shares_django_file(options.url, options.database):
        extra.setdefault("install_schema", False)
    return extra


def _close(staged: object) -> None:
    close = getattr(staged, "close", None)
    if callable(close):
        close()


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
