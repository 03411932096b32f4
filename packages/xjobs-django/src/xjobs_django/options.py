"""The backend's `OPTIONS`, read once: the xjobs URL and the knobs of the Django mapping."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from xjobs.declare.job import EnqueueOptions
from xjobs.declare.retry import MAX_ATTEMPTS
from xjobs.errors import OptionInvalidError
from xjobs_django.flow import read_flow

DEFAULT_MAX_ATTEMPTS = 3
KNOWN = frozenset({"url", "max_attempts", "database", "backend_options", "flow", "outbox"})


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """What `TASKS[alias]["OPTIONS"]` says.

    `url` is the xjobs backend (`postgresql://…`, `redis://…`, `memory://`); `max_attempts`
    bounds how often a task is started when its worker dies under it (a task that raises fails at
    once, as Django's tasks do); `database` is the Django database whose commit releases an
    enqueue (`None`: enqueue at once); `backend_options` go to the xjobs backend as they are;
    `flow` maps a task's import path to its debounce or throttle window (docs/flow-control.md);
    `outbox` stages an enqueue made in a transaction on that transaction's own connection (the
    xjobs backend's outbox in the same database: a SQLite file, a Postgres database), where it
    commits or rolls back with it, for `xjobs_relay` to publish.
    """

    url: str
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    database: str | None = "default"
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    flow: Mapping[str, EnqueueOptions] = field(default_factory=dict)
    outbox: bool = False

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What one shared connection is kept under: the URL and the backend options."""
        return self.url, tuple(sorted((k, repr(v)) for k, v in self.backend_options.items()))


def _fail(alias: str, option: str, why: str) -> OptionInvalidError:
    return OptionInvalidError(f'TASKS["{alias}"]["OPTIONS"]["{option}"] {why}')


def read_options(alias: str, raw: Mapping[str, Any]) -> BackendOptions:
    """Check `OPTIONS` for the backend `alias`; a missing or bad value is `XJOBS_OPTION_INVALID`."""
    unknown = sorted(set(raw) - KNOWN)
    if unknown:
        raise _fail(alias, unknown[0], f"is not an option; known: {', '.join(sorted(KNOWN))}")
    url = raw.get("url")
    if not isinstance(url, str) or "://" not in url:
        raise _fail(alias, "url", "must be an xjobs backend URL, e.g. postgresql://… or redis://…")
    attempts = raw.get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int):
        raise _fail(alias, "max_attempts", f"must be a whole number, got {attempts!r}")
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise _fail(alias, "max_attempts", f"must be between 1 and {MAX_ATTEMPTS}")
    database = raw.get("database", "default")
    if database is not None and not isinstance(database, str):
        raise _fail(alias, "database", f"must be a database alias or None, got {database!r}")
    extra = raw.get("backend_options", {})
    if not isinstance(extra, Mapping):
        raise _fail(alias, "backend_options", "must be a mapping")
    flow = read_flow(alias, raw.get("flow", {}))
    outbox = raw.get("outbox", False)
    if not isinstance(outbox, bool):
        raise _fail(alias, "outbox", f"must be True or False, got {outbox!r}")
    if outbox and database is None:
        raise _fail(alias, "outbox", 'stages in the transactions of "database", which is None')
    return BackendOptions(url, attempts, database, dict(extra), flow, outbox)
