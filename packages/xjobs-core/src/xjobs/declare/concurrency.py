"""`job(concurrency=...)` as declared, resolved once: a fleet-wide limit, or a limit per derived key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from xjobs.declare.keys import derive_str
from xjobs.errors import DeclarationInvalidError
from xjobs.options import finite_count

WhenBusy = Literal["wait", "fail"]
MAX_CONCURRENCY = 100_000


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most `limit` runs at once per value of `key(input)`; `when_busy` says what a busy key does."""

    key: Callable[[Any], str]
    limit: int
    when_busy: WhenBusy = "wait"


@dataclass(frozen=True, slots=True)
class ResolvedConcurrency:
    """The limit, and for a keyed limit the key function and what a busy key does."""

    limit: int
    key: Callable[[Any], str] | None = None
    when_busy: WhenBusy | None = None

    def lease_key(self, job: str, value: Any) -> str:
        """The fleet slot's key: `job:<name>`, or `job-key:<url-encoded name>:<key>`."""
        if self.key is None:
            return f"job:{job}"
        derived = derive_str(self.key, value, what="concurrency key", job=job)
        return f"job-key:{quote(job, safe='')}:{derived}"


def resolve_concurrency(value: object, *, job: str) -> ResolvedConcurrency | None:
    """`concurrency=` as declared (None, an int, or `Concurrency`), checked once at declaration."""
    if value is None:
        return None
    if isinstance(value, Concurrency):
        limit = finite_count("concurrency.limit", value.limit, minimum=0, maximum=MAX_CONCURRENCY)
        if not callable(value.key):
            raise DeclarationInvalidError(f"concurrency.key of job {job!r} must be a callable")
        if value.when_busy not in ("wait", "fail"):
            raise DeclarationInvalidError(
                f"concurrency.when_busy of job {job!r} must be 'wait' or 'fail', got {value.when_busy!r}"
            )
        return ResolvedConcurrency(limit=limit, key=value.key, when_busy=value.when_busy)
    limit = finite_count("concurrency", value, minimum=0, maximum=MAX_CONCURRENCY)
    return ResolvedConcurrency(limit=limit)
