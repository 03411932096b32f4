"""`manage.py xjobs_relay`: the relay for the project's backend — it publishes the jobs that
enqueues staged in Django's transactions (`OPTIONS["outbox"]`) into their queues; SIGTERM drains
it and it exits 0."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS

from xjobs.roles.relay_options import RelayKwargs
from xjobs_cli.argtypes import seconds
from xjobs_django.commands_shared import log_to_stderr, serve_role
from xjobs_django.roles import run_relay


class Command(BaseCommand):
    """Run the relay for one `TASKS` backend until SIGTERM or SIGINT."""

    help = (
        "Publish the tasks staged in Django's transactions (OPTIONS['outbox']) into their queues "
        "until SIGTERM or SIGINT; run one or more beside the workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """`--backend`, `--drain-timeout`."""
        parser.add_argument(
            "--backend",
            default=DEFAULT_TASK_BACKEND_ALIAS,
            help="the TASKS alias to relay for (default: default)",
        )
        parser.add_argument(
            "--drain-timeout",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="on SIGTERM, how long the pass in flight may finish (default 30)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Publish until a signal drains the relay; print its counts."""
        log_to_stderr()
        knobs: RelayKwargs = {}
        if options["drain_timeout"] is not None:
            knobs["drain_timeout"] = timedelta(seconds=options["drain_timeout"])
        stats = serve_role(run_relay(options["backend"], handle_signals=True, **knobs))
        counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
        self.stderr.write(f"relay stopped: id={stats.role_id} {counts}")
