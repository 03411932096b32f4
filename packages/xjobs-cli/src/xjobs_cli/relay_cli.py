"""`xjobs relay MODULE:APP`: a relay process publishing the app's outbox into its queues, draining on SIGTERM."""

from __future__ import annotations

import argparse
from datetime import timedelta

from xjobs import App
from xjobs_cli.argtypes import seconds
from xjobs_cli.role_cli import Options, RoleCommand


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch", type=int, default=None, metavar="N", help="rows per pass (default 100)"
    )
    parser.add_argument(
        "--lease",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="how long a pass holds its rows; a killed relay's rows are retaken after it (default 30)",
    )


def _options(args: argparse.Namespace) -> Options:
    """`run_relay` keywords for what the command line set; the rest keep their defaults."""
    options: Options = {}
    if args.batch is not None:
        options["batch"] = args.batch
    if args.lease is not None:
        options["lease"] = timedelta(seconds=args.lease)
    return options


command = RoleCommand(
    name="relay",
    help="run an outbox relay process for an app",
    description=(
        "Publish the jobs MODULE:APP staged in its outbox (handle.stage inside your own "
        "transactions) into its queues, until SIGTERM or SIGINT. Run several for "
        "availability: each row is leased to one relay; a repeated publish is deduped."
    ),
    app_help="the xjobs.App whose outbox to relay, e.g. myapp.main:app",
    drain_help="on SIGTERM, how long the pass in flight may finish (default 30)",
    add_arguments=_add_arguments,
    options=_options,
    run=App.run_relay,
)
