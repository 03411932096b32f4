"""`xjobs scheduler MODULE:APP`: a scheduler process that campaigns for leadership, fires tasks, drains on SIGTERM."""

from __future__ import annotations

import argparse
from datetime import timedelta

from xjobs import App
from xjobs_cli.argtypes import seconds
from xjobs_cli.role_cli import Options, RoleCommand

_FLAGS = {
    "leader_ttl": "how long leadership lasts without a renewal (default 30)",
    "renew_every": "how often the leader renews; at most half the TTL (default 10)",
    "misfire_grace": "how late an occurrence may be seen and still count as on time (default 60)",
}


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    for name, text in _FLAGS.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=seconds,
            default=None,
            metavar="SECONDS",
            help=text,
        )


def _options(args: argparse.Namespace) -> Options:
    """`run_scheduler` keywords for what the command line set; the rest keep their defaults."""
    return {
        name: timedelta(seconds=getattr(args, name))
        for name in _FLAGS
        if getattr(args, name) is not None
    }


command = RoleCommand(
    name="scheduler",
    help="run a scheduler process for an app's cron tasks",
    description=(
        "Run the scheduler for MODULE:APP until SIGTERM or SIGINT. Run as many as you like: "
        "one leads and fires each task occurrence once; the others take over when its "
        "lease lapses. On SIGTERM the round in flight finishes and leadership is released."
    ),
    app_help="the xjobs.App whose tasks to fire, e.g. myapp.main:app",
    drain_help="on SIGTERM, how long the round in flight may finish (default 30)",
    add_arguments=_add_arguments,
    options=_options,
    run=App.run_scheduler,
)
