"""`xjobs relay MODULE:APP`: a relay process publishing the app's outbox into its queues, draining on SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import timedelta
from typing import Any

from xjobs import App, RelayStats
from xjobs_cli.argtypes import seconds
from xjobs_cli.load import load_app

log = logging.getLogger("xjobs.cli.relay")


def _relay_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_relay` keywords for what the command line set; the rest keep their defaults."""
    options: dict[str, Any] = {}
    if args.batch is not None:
        options["batch"] = args.batch
    for name in ("lease", "drain_timeout"):
        if getattr(args, name) is not None:
            options[name] = timedelta(seconds=getattr(args, name))
    return options


async def serve(app: App, options: dict[str, Any]) -> RelayStats:
    """Open `app` and run its relay until SIGTERM/SIGINT; log the stats line at exit."""
    async with app:
        stats = await app.run_relay(handle_signals=True, **options)
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    log.info("relay stopped: id=%s %s", stats.relay_id, counts)
    return stats


def run(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    asyncio.run(serve(app, _relay_options(args)))
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        "relay",
        help="run an outbox relay process for an app",
        description=(
            "Publish the jobs MODULE:APP staged in its outbox (handle.stage inside your own "
            "transactions) into its queues, until SIGTERM or SIGINT. Run several for "
            "availability: each row is leased to one relay; a repeated publish is deduped."
        ),
    )
    parser.add_argument(
        "app", metavar="MODULE:APP", help="the xjobs.App whose outbox to relay, e.g. myapp.main:app"
    )
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
    parser.add_argument(
        "--drain-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="on SIGTERM, how long the pass in flight may finish (default 30)",
    )
    parser.set_defaults(run=run)
    return parser
