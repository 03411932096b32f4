"""`xjobs workers list`: the live worker processes, each with the jobs it runs now."""

from __future__ import annotations

import argparse
import asyncio

from xjobs.operate import shapes
from xjobs.operate.timefmt import age
from xjobs_cli.output import EXIT_OK, Body, emit
from xjobs_cli.table import render
from xjobs_cli.target import Subparsers, Target, add_operator_parser, opened, resolve


async def _worker_list(target: Target) -> Body:
    async with opened(target) as app:
        workers = await app.operator.workers()
        now = app.clock.now_ms()
    return {"now_ms": now, "workers": [shapes.worker(w) for w in workers]}


def _list_text(body: Body) -> str:
    workers = body["workers"]
    if not workers:
        return "no live worker"
    now = body["now_ms"]
    rows = [
        [
            w["id"],
            w["host"],
            w["pid"],
            ",".join(w["queues"]),
            age(w["started_at_ms"], now),
            age(w["last_seen_ms"], now),
            len(w["running"]),
        ]
        for w in workers
    ]
    table = render(["id", "host", "pid", "queues", "started", "last seen", "running"], rows)
    running = [f"  {w['id']}: {', '.join(w['running'])}" for w in workers if w["running"]]
    return "\n".join([table, *(["running jobs:", *running] if running else [])])


def _run_list(args: argparse.Namespace) -> int:
    target = resolve(args)
    target.none()
    emit(args.json, "workers.list", asyncio.run(_worker_list(target)), _list_text)
    return EXIT_OK


def add_parser(commands: Subparsers) -> argparse.ArgumentParser:
    """The `xjobs workers` subparser and its sub-verbs."""
    parser = commands.add_parser(
        "workers",
        help="see the live worker processes",
        description="The live worker processes (a row expires when its process stops beating).",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    add_operator_parser(
        verbs,
        "list",
        help="every live worker: host, pid, queues, started, last seen, running jobs",
        description="Every live worker process: its id, host, pid, queues, when it started and "
        "last beat, and the ids of the jobs it runs now.",
        run=_run_list,
    )
    return parser
