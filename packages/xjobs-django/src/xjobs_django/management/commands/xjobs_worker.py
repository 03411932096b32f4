"""`manage.py xjobs_worker [--queues A,B] [--concurrency N]`: run a worker for the project's
tasks with Django set up; SIGTERM drains it as `xjobs worker`'s does, and it exits 0."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS

from xjobs.errors import XJobsError
from xjobs.roles.worker_options import WorkerKwargs
from xjobs_cli.argtypes import queue_list, seconds
from xjobs_django.commands_shared import log_to_stderr, serve_role
from xjobs_django.worker import backend_queues, run_worker


def _options(options: dict[str, Any]) -> WorkerKwargs:
    knobs: WorkerKwargs = {"concurrency": options["concurrency"]}
    if options["lease"] is not None:
        knobs["lease"] = timedelta(seconds=options["lease"])
    if options["drain_timeout"] is not None:
        knobs["drain_timeout"] = timedelta(seconds=options["drain_timeout"])
    return knobs


class Command(BaseCommand):
    """Run a worker for the tasks of one `TASKS` backend until SIGTERM or SIGINT."""

    help = (
        "Run a worker for the project's tasks until SIGTERM or SIGINT: claiming stops, running "
        "tasks may finish until the drain cut-off, then the process exits 0. A second signal "
        "interrupts at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """`--backend`, `--queues`, `--concurrency`, `--lease`, `--drain-timeout`."""
        parser.add_argument(
            "--backend",
            default=DEFAULT_TASK_BACKEND_ALIAS,
            help="the TASKS alias to serve (default: default)",
        )
        parser.add_argument(
            "--queues",
            type=queue_list,
            default=None,
            metavar="A,B",
            help="comma-separated queues to serve (default: the backend's QUEUES)",
        )
        parser.add_argument(
            "--concurrency", type=int, default=10, metavar="N", help="slots per queue (default 10)"
        )
        parser.add_argument(
            "--lease",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="how long a claim holds a task between heartbeats; a task of a killed worker "
            "runs again after it (default 30)",
        )
        parser.add_argument(
            "--drain-timeout",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="on SIGTERM, how long running tasks may finish before being interrupted "
            "(default 30)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Serve the queues until a signal drains the worker; print its counts at exit."""
        log_to_stderr()
        alias = options["backend"]
        try:
            queues = options["queues"] or backend_queues(alias)
            knobs = _options(options)
        except XJobsError as exc:  # a refusal: bad options, an unknown backend alias
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        stats = serve_role(run_worker(alias, queues=queues, handle_signals=True, **knobs))
        counts = " ".join(f"{name}={value}" for name, value in stats.as_dict().items())
        self.stderr.write(f"worker stopped: id={stats.role_id} {counts}")
