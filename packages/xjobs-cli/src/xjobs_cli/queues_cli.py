"""`xjobs queues list|pause|resume`: each queue's counts, its oldest due job, and its pause."""

from __future__ import annotations

import argparse
import asyncio

from xjobs.contract.introspection import COUNT_CAP, HOUR_MS
from xjobs.operate import shapes
from xjobs.operate.counter_sums import Window, window
from xjobs.operate.timefmt import span
from xjobs_cli import pause_cli
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve

COUNTS = ("ready", "scheduled", "running", "waiting", "dead", "failed")


def _deferred(win: Window, queue_of: dict[str, str]) -> dict[str, int]:
    """Runs deferred over a rate per queue, from the counters (a name the app does not declare is
    not placed)."""
    per_queue: dict[str, int] = {}
    for (name, outcome), n in win.counts.items():
        if outcome == "deferred" and name in queue_of:
            per_queue[queue_of[name]] = per_queue.get(queue_of[name], 0) + n
    return per_queue


async def _queue_list(target: Target) -> Body:
    async with opened(target) as app:
        op = app.operator
        queues = await op.queues()
        pauses = await op.pauses()
        now = app.clock.now_ms()
        deferred = _deferred(
            await window(op.counters, now, HOUR_MS),
            {name: handle.queue for name, handle in app.jobs.items()},
        )
    return {
        "now_ms": now,
        "count_cap": COUNT_CAP,
        "queues": [
            {**shapes.queue_counts(q, now), "deferred_last_hour": deferred.get(q.queue, 0)}
            for q in queues
        ],
        "paused_jobs": [p.name for p in pauses if p.kind == "job"],
    }


def _count(n: int) -> int | str:
    return f"{n}+" if shapes.capped(n) else n


def _list_text(body: Body) -> str:
    queues = body["queues"]
    if not queues:
        lines = ["no queue has jobs or a pause"]
    else:
        rows = [
            [
                q["queue"],
                *(_count(q[c]) for c in COUNTS),
                "-"
                if q["oldest_ready_age_s"] is None
                else span(int(q["oldest_ready_age_s"] * 1000)),
                q.get("deferred_last_hour", 0),
                "paused" if q["paused"] else "",
            ]
            for q in queues
        ]
        headers = ["queue", *COUNTS, "oldest ready", "deferred 1h", "paused"]
        lines = [render(headers, rows, right=range(1, len(COUNTS) + 3))]
    if body["paused_jobs"]:
        lines.append(f"paused job names: {', '.join(body['paused_jobs'])}")
    return "\n".join(lines)


def _run_list(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    emit(args.json, "queues.list", asyncio.run(_queue_list(target)), _list_text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs queues` subparser and its sub-verbs."""
    parser = commands.add_parser(
        "queues",
        help="see queues; pause and resume them",
        description="Each queue's counts and oldest due job; pause a queue (no worker claims "
        "from it) and resume it.",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    add_operator_parser(
        verbs,
        "list",
        help="every queue: ready, scheduled, running, waiting, dead, failed, oldest ready, "
        "deferred in the last hour, paused",
        description="Every queue with jobs or a pause: how many jobs are ready (due now), "
        f"scheduled (delayed or retrying), running, waiting, dead and failed (each counted up "
        f"to {COUNT_CAP}, shown as {COUNT_CAP}+ beyond), how long its oldest due job has "
        "waited, how many runs were deferred over a rate limit in the last hour, and whether "
        "it is paused.",
        run=_run_list,
    )
    pause_cli.add_parsers(verbs, "queue")
    return parser
