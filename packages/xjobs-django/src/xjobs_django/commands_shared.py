"""What the `manage.py xjobs_*` role commands share: xjobs' records on stderr, and a role run
until SIGTERM with a refusal reported as Django's `CommandError`."""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

from django.core.management.base import CommandError

from xjobs.errors import XJobsError
from xjobs_cli.logs import ExtraFieldsFormatter
from xjobs_cli.role_loop import run_role

T = TypeVar("T")


def log_to_stderr() -> None:
    """xjobs' records on stderr, as `xjobs worker` prints them, unless logging is configured."""
    xjobs = logging.getLogger("xjobs")
    if xjobs.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(ExtraFieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    xjobs.addHandler(handler)
    xjobs.setLevel(logging.INFO)


def serve_role(serving: Coroutine[Any, Any, T]) -> T:
    """Run a role's coroutine to its end (SIGTERM drains it); a refusal (bad options, an unknown
    backend alias) becomes a `CommandError` with its code."""
    try:
        return run_role(serving)
    except XJobsError as exc:
        raise CommandError(f"{exc.code}: {exc.message}") from exc
