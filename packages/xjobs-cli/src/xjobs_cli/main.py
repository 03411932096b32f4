"""The `xjobs` command: parses the command line, runs one verb, turns refusals into coded exits.

A refusal (bad input, a verb the backend refused) exits 2; an unreachable or failing backend
exits 1. With `--json` a refusal, a usage error included, is one JSON error object on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from xjobs import XJobsError
from xjobs_cli import (
    backends_cli,
    backfills_cli,
    demo_cli,
    install_cli,
    jobs_cli,
    mcp_cli,
    migrate_cli,
    purge_cli,
    queues_cli,
    relay_cli,
    scheduler_cli,
    stats_cli,
    tasks_cli,
    web_cli,
    worker_cli,
    workers_cli,
)
from xjobs_cli.errors import UnexpectedError, UsageError
from xjobs_cli.logs import LEVELS, configure_logging
from xjobs_cli.output import EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, report
from xjobs_cli.target import URL_ENV
from xjobs_cli.version import version_line

Command = Callable[[argparse.Namespace], int]

# Each verb and the log level it starts at: a worker narrates, the demo and listings stay quiet.
_VERBS: tuple[tuple[Callable[..., argparse.ArgumentParser], str], ...] = (
    (worker_cli.command.add_parser, "INFO"),
    (scheduler_cli.command.add_parser, "INFO"),
    (relay_cli.command.add_parser, "INFO"),
    (jobs_cli.add_parser, "WARNING"),
    (queues_cli.add_parser, "WARNING"),
    (tasks_cli.add_parser, "WARNING"),
    (workers_cli.add_parser, "WARNING"),
    (stats_cli.add_parser, "WARNING"),
    (purge_cli.add_parser, "WARNING"),
    (backfills_cli.add_parser, "WARNING"),
    (demo_cli.add_parser, "WARNING"),
    (backends_cli.add_parser, "WARNING"),
    (install_cli.add_parser, "WARNING"),
    (migrate_cli.add_parser, "WARNING"),
    (web_cli.add_parser, "INFO"),
    (mcp_cli.add_parser, "WARNING"),
)


class _JsonUsageParser(argparse.ArgumentParser):
    """A parser whose usage errors raise `UsageError` (to be printed as JSON), not usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def build_parser(*, json_errors: bool = False) -> argparse.ArgumentParser:
    """The `xjobs` parser with every verb; with `json_errors`, usage errors raise `UsageError`."""
    parser_class = _JsonUsageParser if json_errors else argparse.ArgumentParser
    parser = parser_class(
        prog="xjobs",
        description="xjobs: durable background jobs — run workers, schedulers and relays, see and "
        "steer jobs, queues, tasks and workers, the demo.",
        epilog=f"environment: ${URL_ENV} is the backend URL a command opens when it names no "
        "MODULE:APP and no --url (a password in it stays off the command line); printed URLs "
        "hide their password.",
    )
    parser.add_argument("--version", action="store_true", help="print the xjobs version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_parser, level in _VERBS:
        _add_log_level(add_parser(commands), level)
    return parser


def _add_log_level(parser: argparse.ArgumentParser, level: str) -> None:
    """`--log-level` on each command that runs (the leaves: `xjobs jobs list`, not `xjobs jobs`)."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if nested:
        for action in nested:
            for sub in dict.fromkeys(action.choices.values()):
                _add_log_level(sub, level)
        return
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LEVELS,
        default=level,
        help=f"log records at this level and above to stderr (default {level})",
    )


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_REFUSED


def main(argv: Sequence[str] | None = None) -> int:
    """Run `xjobs` with `argv` (default: the process's arguments); answers the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in arguments
    parser = build_parser(json_errors=wants_json)
    try:
        args = parser.parse_args(arguments)
    except UsageError as exc:
        return report(exc, as_json=True)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return _exit_code(exc)
    if args.version:
        print(version_line())
        return EXIT_OK
    if args.command is None:
        if wants_json:
            return report(UsageError("name a command (see: xjobs --help)"), as_json=True)
        parser.print_help(sys.stderr)
        return EXIT_REFUSED
    configure_logging(args.log_level)
    as_json = bool(getattr(args, "json", False))
    command: Command = args.run
    try:
        return command(args)
    except XJobsError as exc:
        return report(exc, as_json=as_json)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not as_json:
            raise
        return report(UnexpectedError(f"{type(exc).__name__}: {exc}"), as_json=True)


if __name__ == "__main__":
    raise SystemExit(main())
