"""The `xjobs` command: parses the command line, runs one verb, turns refusals into exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from xjobs import XJobsError
from xjobs_cli import backends_cli, demo_cli, install_cli, relay_cli, scheduler_cli, worker_cli
from xjobs_cli.logs import LEVELS, configure_logging
from xjobs_cli.version import version_line

Command = Callable[[argparse.Namespace], int]

EXIT_OK = 0
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130

# Each verb and the log level it starts at: a worker narrates, the demo and listings stay quiet.
_VERBS: tuple[tuple[Callable[..., argparse.ArgumentParser], str], ...] = (
    (worker_cli.command.add_parser, "INFO"),
    (scheduler_cli.command.add_parser, "INFO"),
    (relay_cli.command.add_parser, "INFO"),
    (demo_cli.add_parser, "WARNING"),
    (backends_cli.add_parser, "WARNING"),
    (install_cli.add_parser, "WARNING"),
)


def build_parser() -> argparse.ArgumentParser:
    """The `xjobs` parser with every verb."""
    parser = argparse.ArgumentParser(
        prog="xjobs",
        description="xjobs: durable background jobs — run workers, schedulers and relays, the demo, and inspect a setup.",
    )
    parser.add_argument("--version", action="store_true", help="print the xjobs version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_parser, level in _VERBS:
        verb = add_parser(commands)
        verb.add_argument(
            "--log-level",
            type=str.upper,
            choices=LEVELS,
            default=level,
            help=f"log records at this level and above to stderr (default {level})",
        )
    return parser


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return EXIT_OK
    return code if isinstance(code, int) else EXIT_REFUSED


def main(argv: Sequence[str] | None = None) -> int:
    """Run `xjobs` with `argv` (default: the process's arguments); answers the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return _exit_code(exc)
    if args.version:
        print(version_line())
        return EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_REFUSED
    configure_logging(args.log_level)
    command: Command = args.run
    try:
        return command(args)
    except XJobsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
