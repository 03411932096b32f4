"""`manage.py xjobs_install`: create or upgrade the tables (or keys) of a `TASKS` backend's URL."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.tasks import DEFAULT_TASK_BACKEND_ALIAS

from xjobs.errors import XJobsError
from xjobs_cli.install_cli import install
from xjobs_django.worker import xjobs_backend


class Command(BaseCommand):
    """Install the xjobs backend one `TASKS` alias names (idempotent, as `xjobs install`)."""

    help = (
        "Create or upgrade the durable structures of the xjobs backend a TASKS alias names "
        "(idempotent; a worker also installs a missing schema when it opens)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """`--backend ALIAS`."""
        parser.add_argument(
            "--backend",
            default=DEFAULT_TASK_BACKEND_ALIAS,
            help="the TASKS alias to install (default: default)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Install and print what was done."""
        try:
            url = xjobs_backend(options["backend"]).xjobs.url
            self.stdout.write(asyncio.run(install(url, None)))
        except XJobsError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
