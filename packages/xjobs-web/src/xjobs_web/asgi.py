"""`dashboard(app, **options)`: the Starlette app of the pages, the actions and the shipped static
files, to mount under a path of the service's own ASGI server (or to serve alone)."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from xjobs import App
from xjobs_web import actions, pages
from xjobs_web.guard import Dashboard, guarded
from xjobs_web.options import Binding, resolve_options
from xjobs_web.perimeter import Perimeter
from xjobs_web.render import environment


def dashboard(app: App, **options: Any) -> Starlette:
    """The dashboard over `app.operator`, to mount in a service: it needs `auth` (or
    `unsafe_no_auth=True`) and answers loopback names and `allowed_hosts`. The app is read at
    request time, so it may be built before the service opens `app` (its lifespan)."""
    return build(app, options)


def build(app: App, options: dict[str, Any], binding: Binding | None = None) -> Starlette:
    """The dashboard, mounted (`binding` None) or served alone by `xjobs web` at `binding`."""
    resolved, hosts = resolve_options(options, binding)
    dash = Dashboard(app, resolved, environment(), hosts)
    reads = [
        ("/", pages.overview_page, "overview"),
        ("/jobs", pages.jobs_page, "jobs"),
        ("/jobs/{job_id}", pages.job_page, "job"),
        ("/failures", pages.failures_page, "failures"),
        ("/tasks", pages.tasks_page, "tasks"),
        ("/backfills", pages.backfills_page, "backfills"),
        ("/workers", pages.workers_page, "workers"),
    ]
    writes = [
        ("/act", actions.act, "act"),
        ("/pause", actions.pause, "pause"),
        ("/task", actions.task, "task"),
    ]
    routes: list[Route | Mount] = [
        Route(path, guarded(dash, handler), methods=["GET"], name=name)
        for path, handler, name in reads
    ]
    routes += [
        Route(path, guarded(dash, handler, action=True), methods=["POST"], name=name)
        for path, handler, name in writes
    ]
    routes.append(Mount("/static", StaticFiles(packages=[("xjobs_web", "static")]), name="static"))
    return Starlette(routes=routes, middleware=[Middleware(Perimeter, dash=dash)])
