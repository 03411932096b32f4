"""The verb of a long-running role (`xjobs worker|scheduler|relay MODULE:APP`): its shared flags and run.

A role's own module says only what differs: its help, its flags, and how they become options.
"""

from __future__ import annotations

import argparse
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from xjobs import App, RoleStats
from xjobs_cli.argtypes import seconds
from xjobs_cli.load import load_app
from xjobs_cli.role_loop import run_role

Options = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RoleCommand:
    """One role's verb. `run` is the `App.run_*` that runs it; `options` reads its own flags."""

    name: str
    help: str
    description: str
    app_help: str
    drain_help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    options: Callable[[argparse.Namespace], Options]
    run: Callable[..., Awaitable[RoleStats]]

    def add_parser(
        self, commands: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> argparse.ArgumentParser:
        """The verb's subparser: `MODULE:APP`, the role's own flags, then `--drain-timeout`."""
        parser = commands.add_parser(self.name, help=self.help, description=self.description)
        parser.add_argument("app", metavar="MODULE:APP", help=self.app_help)
        self.add_arguments(parser)
        parser.add_argument(
            "--drain-timeout",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help=self.drain_help,
        )
        parser.set_defaults(run=functools.partial(run_command, self))
        return parser


def run_command(command: RoleCommand, args: argparse.Namespace) -> int:
    """Load the app and serve the role until SIGTERM/SIGINT drains it; exit 0."""
    app = load_app(args.app)
    options = command.options(args)
    if args.drain_timeout is not None:
        options["drain_timeout"] = timedelta(seconds=args.drain_timeout)
    run_role(serve(command, app, options))
    return 0


async def serve(command: RoleCommand, app: App, options: Options) -> RoleStats:
    """Open `app` and run the role with signals handled; log `<role> stopped: id=… k=v …` at exit.

    The start line is core's `jobs.<role>.started`.
    """
    async with app:
        stats = await command.run(app, handle_signals=True, **options)
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    logging.getLogger(f"xjobs.cli.{command.name}").info(
        "%s stopped: id=%s %s", command.name, stats.role_id, counts
    )
    return stats
