"""The verb of a long-running role (`xjobs worker|scheduler|relay MODULE:APP`): its shared flags and run.

A role's own module says only what differs: its help, its flags, and how they become options.
The shared flags include the telemetry ones: `--metrics-port`, `--health-port`, `--tracing`,
`--log-format json`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from xjobs import App, RoleStats
from xjobs.observe.health import DEFAULT_GRACE_S, backend_probe
from xjobs.observe.http_server import DEFAULT_HOST, Endpoints, TelemetryServer
from xjobs_cli.argtypes import seconds
from xjobs_cli.load import load_app
from xjobs_cli.logs import LOG_FORMATS, configure_logging
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
        """The verb's subparser: `MODULE:APP`, the role's own flags, `--drain-timeout`, telemetry."""
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
        add_telemetry_arguments(parser)
        parser.set_defaults(run=functools.partial(run_command, self))
        return parser


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return port


def add_telemetry_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every role shares: metrics, health probes, tracing, the log format."""
    group = parser.add_argument_group("telemetry")
    group.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at /metrics on this port (and /healthz, /readyz without "
        "--health-port); needs xjobs-core[prometheus]",
    )
    group.add_argument(
        "--health-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve /healthz (the role's loop is alive) and /readyz (the backend answers)",
    )
    group.add_argument(
        "--telemetry-host",
        default=DEFAULT_HOST,
        metavar="HOST",
        help=f"the address the metrics and health ports bind (default {DEFAULT_HOST}, this host "
        "only; 0.0.0.0 opens them to the network, unauthenticated)",
    )
    group.add_argument(
        "--health-grace",
        type=seconds,
        default=DEFAULT_GRACE_S,
        metavar="SECONDS",
        help=f"how far past its next pass a loop may be before /healthz fails (default {DEFAULT_GRACE_S:g})",
    )
    group.add_argument(
        "--backend-gauges",
        choices=("leader", "always", "never"),
        default="leader",
        help="who reads the backend-wide gauges (queue depth, oldest ready, dead, workers): the "
        "scheduler leader (default), this process, or nobody",
    )
    group.add_argument(
        "--tracing",
        action="store_true",
        help="open OpenTelemetry spans through the global tracer provider (the app configures "
        "the SDK); needs xjobs-core[otel]",
    )
    group.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="log lines as text (default) or one JSON object a line",
    )


def run_command(command: RoleCommand, args: argparse.Namespace) -> int:
    """Load the app and serve the role until SIGTERM/SIGINT drains it; exit 0."""
    if args.log_format != "text":
        configure_logging(args.log_level, args.log_format)
    app = load_app(args.app)
    options = command.options(args)
    if args.drain_timeout is not None:
        options["drain_timeout"] = timedelta(seconds=args.drain_timeout)
    instrument(app, args)
    run_role(serve(command, app, options, args))
    return 0


def instrument(app: App, args: argparse.Namespace) -> None:
    """Turn on what the telemetry flags ask for, before the app opens."""
    telemetry = app.telemetry
    if args.metrics_port is not None:
        telemetry.enable_metrics(backend_gauges=args.backend_gauges)
    if args.metrics_port is not None or args.health_port is not None:
        telemetry.enable_health(args.health_grace)
    if args.tracing:
        telemetry.enable_tracing()


@contextmanager
def telemetry_servers(app: App, args: argparse.Namespace) -> Iterator[list[TelemetryServer]]:
    """The metrics and health servers the flags ask for (one when the ports are the same), on
    threads, for as long as the role runs; the app is open."""
    telemetry = app.telemetry
    loop = asyncio.get_running_loop()
    probe = backend_probe(app.backend.jobs.get)
    ports: dict[int, Endpoints] = {}
    if args.metrics_port is not None:
        ports[args.metrics_port] = Endpoints(telemetry.metrics, telemetry.liveness, probe, loop)
    if args.health_port is not None and args.health_port not in ports:
        ports[args.health_port] = Endpoints(None, telemetry.liveness, probe, loop)
    servers: list[TelemetryServer] = []
    try:
        for port, endpoints in ports.items():
            servers.append(TelemetryServer(args.telemetry_host, port, endpoints).start())
        yield servers
    finally:
        for server in servers:
            server.close()


async def serve(
    command: RoleCommand, app: App, options: Options, args: argparse.Namespace | None = None
) -> RoleStats:
    """Open `app` and run the role with signals handled; log `<role> stopped: id=… k=v …` at exit.

    The start line is core's `jobs.<role>.started`.
    """
    async with app:
        if args is None:
            stats = await command.run(app, handle_signals=True, **options)
        else:
            with telemetry_servers(app, args):
                stats = await command.run(app, handle_signals=True, **options)
    counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
    logging.getLogger(f"xjobs.cli.{command.name}").info(
        "%s stopped: id=%s %s", command.name, stats.role_id, counts
    )
    return stats
