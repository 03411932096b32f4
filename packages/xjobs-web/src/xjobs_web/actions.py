"""The actions (each a POST that passed the guard): moves on ids or a filter, confirmed first when
they are many; pause and resume of a queue or a job name; a task's pause, resume and trigger."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlencode, urlsplit

from starlette.responses import RedirectResponse, Response

from xjobs import JobFilter, Operator
from xjobs.contract.introspection import MAX_BULK_BATCH
from xjobs.errors import FilterInvalidError, TaskNotRegisteredError
from xjobs.operate.filters import job_filter
from xjobs_web.errors import ActionRefusedError
from xjobs_web.guard import Dashboard, Visit
from xjobs_web.moves import (
    MoveReport,
    matched,
    move_ids,
    move_where,
    narrowed,
    pause_kind,
    verb_named,
)
from xjobs_web.pages import context, operator_of
from xjobs_web.render import html

# What a browser strips from a URL or reads as a path separator (`/\\evil` is `//evil` to it).
UNSAFE_IN_NEXT = re.compile(r"[\x00-\x20\x7f\\]")


def safe_next(value: str | None, default: str = "/") -> str:
    """`value` when it is a path inside the dashboard's mount (the caller prefixes the mount);
    `default` for anything else: a scheme (`javascript:`, `https://…`), a host (`//evil`), a
    backslash, whitespace or a control character, a `.` or `..` segment (even percent-encoded)."""
    if not value or not value.startswith("/") or value.startswith("//"):
        return default
    if UNSAFE_IN_NEXT.search(value):
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return default
    if any(unquote(segment) in (".", "..") for segment in parts.path.split("/")):
        return default
    return value


def _back(visit: Visit, notice: str) -> Response:
    """303 to the form's `next` (a path inside the dashboard) with a notice."""
    target = safe_next(visit.value("next"))
    joiner = "&" if "?" in target else "?"
    return RedirectResponse(
        f"{visit.base}{target}{joiner}{urlencode({'notice': notice})}", status_code=303
    )


def _where(visit: Visit) -> JobFilter:
    before = visit.value("before")
    return job_filter(
        states=[s for s in visit.form.get("state", []) if s],
        queue=visit.value("queue"),
        name=visit.value("name"),
        tenant=visit.value("tenant"),
        created_before_ms=int(before) if before and before.isdigit() else None,
    )


async def _visible_ids(op: Operator, visit: Visit) -> list[str]:
    """The form's ids, each one the operator sees (another tenant's job is not found: 404)."""
    ids = list(dict.fromkeys(i for i in visit.form.get("id", []) if i))
    if not ids:
        raise FilterInvalidError("the action names no job")
    if len(ids) > MAX_BULK_BATCH:
        raise FilterInvalidError(f"an action names at most {MAX_BULK_BATCH} jobs")
    for job_id in ids:
        await op.record(job_id)
    return ids


def _said(verb: str, report: MoveReport, asked: int | None = None) -> str:
    done = {"cancel": "cancelled", "retry": "retried", "promote": "promoted", "remove": "removed"}[
        verb
    ]
    text = f"{done} {report.moved}" + (f" of {asked}" if asked is not None else "") + " jobs"
    if report.remaining:
        text += f"; {report.remaining} remaining"
    if report.refused:
        first = next(iter(report.refused.items()))
        text += f"; {len(report.refused)} refused (first: {first[0]}: {first[1]})"
    return text


async def act(dash: Dashboard, visit: Visit) -> Response:
    """A move on ids or on a filter: without `confirmed` a page that says how many it would move."""
    verb = verb_named(visit.value("verb") or "")
    op = operator_of(dash, visit)
    confirmed = visit.value("confirmed") == "1"
    back = safe_next(visit.value("next"), "/jobs")
    if visit.value("scope") == "filter":
        now = dash.app.clock.now_ms()
        where = _where(visit)
        if where.created_before_ms is None:
            where = job_filter(
                states=where.states,
                queue=where.queue,
                name=where.name,
                tenant=where.tenant,
                created_before_ms=now + 1,
            )
        bounded = narrowed(verb, where)
        if bounded is None:
            raise FilterInvalidError(f"{verb.name} moves only {', '.join(verb.states)} jobs")
        if confirmed:
            return _back(visit, _said(verb.name, await move_where(op, verb, bounded)))
        count, at_least = await matched(op, verb, bounded, now)
        values = context(
            dash,
            visit,
            "jobs",
            verb=verb.name,
            scope="filter",
            where=bounded,
            count=count,
            at_least=at_least,
            ids=[],
            next=back,
        )
        return html(dash.env, "confirm.html", values)
    ids = await _visible_ids(op, visit)
    if confirmed:
        return _back(visit, _said(verb.name, await move_ids(op, verb, ids), len(ids)))
    values = context(
        dash,
        visit,
        "jobs",
        verb=verb.name,
        scope="ids",
        where=None,
        count=len(ids),
        at_least=False,
        ids=ids,
        next=back,
    )
    return html(dash.env, "confirm.html", values)


def _shared(visit: Visit, what: str) -> None:
    """A tenant-scoped operator may not steer what every tenant shares."""
    if visit.tenant is not None:
        raise ActionRefusedError(
            f"{what} is shared by every tenant; a tenant-scoped operator may not steer it"
        )


async def pause(dash: Dashboard, visit: Visit) -> Response:
    """Pause or resume a queue or a job name (the claim reads the pause row)."""
    kind = pause_kind(visit.value("kind"))
    name = visit.value("name") or ""
    verb = visit.value("op")
    if verb not in ("pause", "resume"):
        raise FilterInvalidError("a pause's op is pause or resume")
    _shared(visit, f"a {kind} pause")
    op = operator_of(dash, visit)
    changed = await (op.pause(kind, name) if verb == "pause" else op.resume(kind, name))
    state = "paused" if verb == "pause" else "resumed"
    return _back(
        visit, f"{kind} {name} {state}" if changed else f"{kind} {name} was already {state}"
    )


async def task(dash: Dashboard, visit: Visit) -> Response:
    """Pause, resume or trigger a task (trigger: enqueue its job now, as `xjobs tasks trigger`)."""
    _shared(visit, "a task")
    name = visit.value("name") or ""
    verb = visit.value("op")
    app = dash.app
    if name not in app.registry.tasks:
        raise TaskNotRegisteredError(f"no task named {name!r} is registered")
    if verb == "trigger":
        result = await app.registry.tasks[name].enqueue()
        if result.deduped:
            return _back(visit, f"task {name}: live job {result.job_id} already holds its key")
        return _back(visit, f"task {name}: enqueued job {result.job_id}")
    if verb not in ("pause", "resume"):
        raise FilterInvalidError("a task's op is pause, resume or trigger")
    changed = await (app.pause_task(name) if verb == "pause" else app.resume_task(name))
    state = "paused" if verb == "pause" else "resumed"
    return _back(visit, f"task {name} {state}" if changed else f"task {name} was already {state}")
