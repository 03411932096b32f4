"""`xjobs worker MODULE:APP`: a long-running worker process that drains on SIGTERM and exits 0."""

from __future__ import annotations

import argparse
from datetime import timedelta

from xjobs import App
from xjobs_cli.argtypes import queue_list, seconds
from xjobs_cli.role_cli import Options, RoleCommand


def _add_arguments(parser: argparse.ArgumentParser) -> None:
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
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="how many plain `def` job bodies may run at once, each on a thread (default: the slots)",
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


def _options(args: argparse.Namespace) -> Options:
    """`run_worker` keywords for what the command line set; the rest keep the worker's defaults."""
    options: Options = {"queues": args.queues, "concurrency": args.concurrency}
    if args.max_in_flight is not None:
        options["max_in_flight"] = args.max_in_flight
    if args.lease is not None:
        options["lease"] = timedelta(seconds=args.lease)
    if args.threads is not None:
        options["threads"] = args.threads
    return options


command = RoleCommand(
    name="worker",
    help="run a worker process for an app",
    description=(
        "Run a worker for MODULE:APP until SIGTERM or SIGINT: claiming stops, running jobs may "
        "finish until the drain cut-off, then the process exits 0. A second signal "
        "interrupts at once."
    ),
    app_help="the xjobs.App to serve, e.g. myapp.main:app",
    drain_help="on SIGTERM, how long running jobs may finish before being interrupted (default 30)",
    add_arguments=_add_arguments,
    options=_options,
    run=App.run_worker,
)
