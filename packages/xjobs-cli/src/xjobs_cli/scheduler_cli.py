"""`xjobs scheduler MODULE:APP`: a scheduler process that campaigns for leadership, fires tasks, drains on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import timedelta
from typing import Any

from xjobs import App, SchedulerStats
from xjobs_cli.argtypes import seconds
from xjobs_cli.load import load_app

log = logging.getLogger("xjobs.cli.scheduler")

_DURATIONS = ("leader_ttl", "renew_every", "misfire_grace", "drain_timeout")


def _scheduler_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_scheduler` keywords for what the command line set; the rest keep their defaults."""
    return {
        name: timedelta(seconds=getattr(args, name))
        for name in _DURATIONS
        if getattr(args, name) is not None
    }


async def serve(app: App, options: dict[str, Any]) -> SchedulerStats:
    """Open `app` and run its scheduler until SIGTERM/SIGINT; log the stats line at exit."""
    async with app:
        stats = await app.run_scheduler(handle_signals=True, **options)
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    log.info("scheduler stopped: id=%s %s", stats.scheduler_id, counts)
    return stats


def run(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    asyncio.run(serve(app, _scheduler_options(args)))
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "scheduler",
        help="run a scheduler process for an app's cron tasks",
        description=(
            "Run the scheduler for MODULE:APP until SIGTERM or SIGINT. Run as many as you like: "
            "one leads and fires each task occurrence once; the others take over when its "
            "lease lapses. On SIGTERM the round in flight finishes and leadership is released."
        ),
    )
    parser.add_argument(
        "app", metavar="MODULE:APP", help="the xjobs.App whose tasks to fire, e.g. myapp.main:app"
    )
    flags = {
        "leader_ttl": "how long leadership lasts without a renewal (default 30)",
        "renew_every": "how often the leader renews; at most half the TTL (default 10)",
        "misfire_grace": "how late an occurrence may be seen and still count as on time (default 60)",
        "drain_timeout": "on SIGTERM, how long the round in flight may finish (default 30)",
    }
    for name, text in flags.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=seconds,
            default=None,
            metavar="SECONDS",
            help=text,
        )
    parser.set_defaults(run=run)
    return parser
