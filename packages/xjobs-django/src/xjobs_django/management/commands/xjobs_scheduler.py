"""`manage.py xjobs_scheduler`: the scheduler role for the project's backend — it fires the cron
tasks the xjobs App registers (the retention purge, every five minutes) on the elected leader;
SIGTERM drains it and it exits 0."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS

from xjobs.roles.scheduler_options import SchedulerKwargs
from xjobs_cli.argtypes import seconds
from xjobs_django.commands_shared import log_to_stderr, serve_role
from xjobs_django.roles import run_scheduler


def _options(options: dict[str, Any]) -> SchedulerKwargs:
    knobs: SchedulerKwargs = {}
    if options["leader_ttl"] is not None:
        knobs["leader_ttl"] = timedelta(seconds=options["leader_ttl"])
    if options["drain_timeout"] is not None:
        knobs["drain_timeout"] = timedelta(seconds=options["drain_timeout"])
    return knobs


class Command(BaseCommand):
    """Run the scheduler for one `TASKS` backend until SIGTERM or SIGINT."""

    help = (
        "Run the scheduler for the project's tasks backend until SIGTERM or SIGINT: the elected "
        "leader among every xjobs_scheduler process fires the cron tasks the backend's xjobs App "
        "registers (the retention purge, on by default); the others stand by. Run one or more "
        "beside the workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """`--backend`, `--leader-ttl`, `--drain-timeout`."""
        parser.add_argument(
            "--backend",
            default=DEFAULT_TASK_BACKEND_ALIAS,
            help="the TASKS alias to schedule for (default: default)",
        )
        parser.add_argument(
            "--leader-ttl",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="how long leadership lasts without a renewal; a standby takes over after it "
            "(default 30)",
        )
        parser.add_argument(
            "--drain-timeout",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="on SIGTERM, how long the dispatch round in flight may finish (default 30)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Fire the tasks while leading until a signal drains the scheduler; print its counts."""
        log_to_stderr()
        serving = run_scheduler(options["backend"], handle_signals=True, **_options(options))
        stats = serve_role(serving)
        counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
        self.stderr.write(f"scheduler stopped: id={stats.role_id} {counts}")
