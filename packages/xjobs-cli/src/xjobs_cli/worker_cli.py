"""`xjobs worker MODULE:APP`: a long-running worker process that drains on SIGTERM and exits 0."""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import timedelta
from typing import Any

from xjobs import App, WorkerStats
from xjobs_cli.argtypes import queue_list, seconds
from xjobs_cli.load import load_app

log = logging.getLogger("xjobs.cli.worker")


def _worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_worker` keywords for what the command line set; the rest keep the worker's defaults."""
    options: dict[str, Any] = {"queues": args.queues, "concurrency": args.concurrency}
    if args.max_in_flight is not None:
        options["max_in_flight"] = args.max_in_flight
    if args.drain_timeout is not None:
        options["drain_timeout"] = timedelta(seconds=args.drain_timeout)
    if args.lease is not None:
        options["lease"] = timedelta(seconds=args.lease)
    return options


def stats_line(worker_id: str, stats: WorkerStats) -> str:
    """`worker stopped: id=… claimed=… completed=… …`, every counter of the worker."""
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    return f"worker stopped: id={worker_id} {counts}"


async def serve(app: App, options: dict[str, Any]) -> WorkerStats:
    """Open `app` and run its worker until SIGTERM/SIGINT drains it; log the stats line at exit.

    The start line is core's `jobs.worker.started`, with the worker id, queues and backend.
    """
    async with app:
        stats = await app.run_worker(handle_signals=True, **options)
    log.info("%s", stats_line(stats.worker_id, stats))
    return stats


def run(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    asyncio.run(serve(app, _worker_options(args)))
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "worker",
        help="run a worker process for an app",
        description=(
            "Run a worker for MODULE:APP until SIGTERM or SIGINT: claiming stops, running jobs may "
            "finish until the drain cut-off, then the process exits 0. A second signal "
            "interrupts at once."
        ),
    )
    parser.add_argument(
        "app", metavar="MODULE:APP", help="the xjobs.App to serve, e.g. myapp.main:app"
    )
    parser.add_argument(
        "--queues",
        type=queue_list,
        default=None,
        metavar="A,B",
        help="comma-separated queues to serve (default: every queue the app's jobs use)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=10, metavar="N", help="slots per queue (default 10)"
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=None,
        metavar="N",
        help="cap on running jobs across all queues (default: the sum of the slots)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="on SIGTERM, how long running jobs may finish before being interrupted (default 30)",
    )
    parser.add_argument(
        "--lease",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help=(
            "how long a claim holds a job between heartbeats; a job of a killed worker is "
            "claimable again after it (default 30)"
        ),
    )
    parser.set_defaults(run=run)
    return parser
