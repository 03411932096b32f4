"""The one shared validator of job, task and queue names, so no key, channel or row can collide."""

from __future__ import annotations

import re

from xjobs.errors import DeclarationInvalidError, QueueNameInvalidError

QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,79}")
JOB_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
DEFAULT_QUEUE = "default"


def validate_queue(name: object) -> str:
    """A queue name: 1 to 80 ASCII letters, digits, `_` or `-`, starting with a letter or digit."""
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise QueueNameInvalidError(
            f"queue name {name!r} is not 1-80 characters of [A-Za-z0-9_-] starting with a letter or digit"
        )
    return name


def validate_job_name(name: object, *, what: str = "job") -> str:
    """A job or task name: up to 128 ASCII characters of `[A-Za-z0-9_.-]`, not starting with a digit."""
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise DeclarationInvalidError(
            f"{what} name {name!r} is not 1-128 characters of [A-Za-z0-9_.-] starting with a letter or _"
        )
    return name
