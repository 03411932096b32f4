"""`xjobs tasks list|pause|resume|trigger`: the app's cron tasks (they need `MODULE:APP`)."""

from __future__ import annotations

import argparse
import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from xjobs import App
from xjobs.errors import TaskNotRegisteredError
from xjobs.operate import shapes
from xjobs.operate.timefmt import age, iso
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

NEEDS_APP = "tasks are declared in the app's code, not stored in the backend"


async def _task_list(target: Target) -> Body:
    async with opened(target) as app:
        tasks = await app.operator.tasks()
        now = app.clock.now_ms()
    return {"now_ms": now, "tasks": [shapes.task(t) for t in tasks]}


def _list_text(body: Body) -> str:
    tasks = body["tasks"]
    if not tasks:
        return "the app declares no task"
    now = body["now_ms"]
    rows = [
        [
            t["name"],
            t["job"],
            t["cron"],
            t["tz"],
            f"{iso(t['next_ms'])} ({age(t['next_ms'], now)})",
            "-" if t["last_fire"] is None else age(t["last_fire"]["occurrence_ms"], now),
            "paused" if t["paused"] else "",
        ]
        for t in tasks
    ]
    return render(["task", "job", "cron", "tz", "next", "last fire", "paused"], rows)


def _task_name(app: App, name: str) -> str:
    if name not in app.registry.tasks:
        known = ", ".join(app.registry.tasks) or "none"
        raise TaskNotRegisteredError(f"no task named {name!r} is registered; known: {known}")
    return name


async def _toggle(pause: bool, target: Target, name: str) -> Body:
    async with opened(target) as app:
        task = _task_name(app, name)
        changed = await (app.pause_task(task) if pause else app.resume_task(task))
    return {"task": name, "changed": changed}


async def _trigger(target: Target, name: str) -> Body:
    async with opened(target) as app:
        handle = app.registry.tasks[_task_name(app, name)]
        result = await handle.enqueue()
    return {
        "task": name,
        "job": handle.job.name,
        "job_id": result.job_id,
        "run_id": result.run_id,
        "deduped": result.deduped,
    }


def _toggle_text(pause: bool, body: Body) -> str:
    name = body["task"]
    if pause:
        return f"paused task {name}" if body["changed"] else f"task {name} was already paused"
    return f"resumed task {name}" if body["changed"] else f"task {name} was not paused"


def _trigger_text(body: Body) -> str:
    if body["deduped"]:
        return f"task {body['task']}: live job {body['job_id']} already holds its key; nothing enqueued"
    return f"task {body['task']}: enqueued {body['job']} job {body['job_id']}"


def _run(
    kind: str,
    work: Callable[[Target, str], Coroutine[Any, Any, Body]] | None,
    text: Callable[[Body], str],
    args: argparse.Namespace,
) -> int:
    target = resolve(args)
    target.require_app(NEEDS_APP)
    if work is None:
        target.none()
        body = asyncio.run(_task_list(target))
    else:
        body = asyncio.run(work(target, target.one("task name")))
    emit(args.json, kind, body, text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs tasks` subparser and its sub-verbs."""
    parser = commands.add_parser(
        "tasks",
        help="see the app's cron tasks; pause, resume or trigger one",
        description="The app's cron tasks (MODULE:APP, not --url: tasks are declared in code).",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    add_operator_parser(
        verbs,
        "list",
        help="every task: job, cron, zone, next occurrence, last fire, paused",
        description="Every registered task: the job it fires, its cron and time zone, its next "
        "occurrence, the last occurrence that dispatched a job, and whether it is paused.",
        run=functools.partial(_run, "tasks.list", None, _list_text),
    )
    add_operator_parser(
        verbs,
        "pause",
        help="pause a task (it fires nothing; it keeps its watermark)",
        description="Pause a task: it fires nothing until resumed; on resume its catch-up "
        "policy decides what the paused time fires.",
        operands="NAME",
        run=functools.partial(
            _run,
            "tasks.pause",
            functools.partial(_toggle, True),
            functools.partial(_toggle_text, True),
        ),
    )
    add_operator_parser(
        verbs,
        "resume",
        help="resume a paused task",
        description="Resume a paused task; its catch-up policy decides what the paused time fires.",
        operands="NAME",
        run=functools.partial(
            _run,
            "tasks.resume",
            functools.partial(_toggle, False),
            functools.partial(_toggle_text, False),
        ),
    )
    add_operator_parser(
        verbs,
        "trigger",
        help="enqueue a task's job now, as a manual run",
        description="Enqueue the task's job now with the input built for this moment and the "
        "job's plain idempotency key (a live job with that key dedupes it); the task's "
        "watermark and last fire are untouched.",
        operands="NAME",
        run=functools.partial(_run, "tasks.trigger", _trigger, _trigger_text),
    )
    return parser
