"""`Rate` as declared (on a job, a queue, a worker), resolved once into the GCRA bucket its runs take a permit of."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote

from xjobs.contract.rates import RateBucket
from xjobs.declare.keys import derive_str
from xjobs.errors import DeclarationInvalidError
from xjobs.options import duration_ms, finite_count

MAX_RATE_LIMIT = 1_000_000


@dataclass(frozen=True, slots=True)
class Rate:
    """At most `limit` runs START per `per` (per value of `key(input)` when a key is given).

    A GCRA bucket: starts are spaced `per / limit` apart on average, and up to `burst` (default:
    `limit`) may start at once after an idle spell. Over any window of length `w` at most
    `burst + limit * w / per` starts are admitted; there is no fixed window to double at its edge.
    """

    limit: int
    per: timedelta
    key: Callable[[Any], str] | None = None
    burst: int | None = None


@dataclass(frozen=True, slots=True)
class ResolvedRate:
    """One rate checked once: the emission interval and burst of its bucket, and its key function."""

    limit: int
    per_ms: int
    burst: int
    key: Callable[[Any], str] | None = None

    @property
    def interval_ms(self) -> float:
        """The emission interval: how far apart starts are spaced on average."""
        return self.per_ms / self.limit

    def bucket(self, scope: str, value: Any, *, job: str) -> RateBucket:
        """The bucket a run of `job` with input `value` takes a permit of, under `scope` (its key's prefix)."""
        key = scope
        if self.key is not None:
            key = f"{scope}:{derive_str(self.key, value, what='rate key', job=job)}"
        return RateBucket(key=key, interval_ms=self.interval_ms, burst=self.burst)


def resolve_rate(value: object, *, what: str) -> ResolvedRate:
    """One `Rate`, checked: a limit of at least 1, a positive period, a burst of at least 1."""
    if not isinstance(value, Rate):
        raise DeclarationInvalidError(f"{what} must be an xjobs.Rate, got {value!r:.80}")
    limit = finite_count(f"{what}.limit", value.limit, minimum=1, maximum=MAX_RATE_LIMIT)
    per_ms = duration_ms(f"{what}.per", value.per)
    burst = limit if value.burst is None else value.burst
    burst = finite_count(f"{what}.burst", burst, minimum=1, maximum=MAX_RATE_LIMIT)
    if value.key is not None and not callable(value.key):
        raise DeclarationInvalidError(f"{what}.key must be a callable")
    return ResolvedRate(limit=limit, per_ms=per_ms, burst=burst, key=value.key)


def resolve_rates(value: object, *, what: str) -> tuple[ResolvedRate, ...]:
    """`rate=` as declared: None, one `Rate`, or a sequence of them (every one applies)."""
    if value is None:
        return ()
    if isinstance(value, Rate):
        return (resolve_rate(value, what=what),)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(resolve_rate(r, what=f"{what}[{i}]") for i, r in enumerate(value))
    raise DeclarationInvalidError(
        f"{what} must be an xjobs.Rate or a list of them, got {value!r:.80}"
    )


def job_scope(job: str, index: int) -> str:
    """The bucket key prefix of the `index`-th rate a job declares: `job:<url-encoded name>:<index>`."""
    return f"job:{quote(job, safe='')}:{index}"


def queue_scope(queue: str, index: int) -> str:
    """The bucket key prefix of the `index`-th rate a worker declares for a queue."""
    return f"queue:{queue}:{index}"


def global_scope(index: int) -> str:
    """The bucket key prefix of the `index`-th global rate a worker declares."""
    return f"global:{index}"
