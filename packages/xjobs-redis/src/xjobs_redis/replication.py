"""`wait_replicas`: every script's writes acknowledged by N replicas (`WAIT`) before it answers.

Redis replicates asynchronously: a primary that fails right after answering may take the write
with it. With `wait_replicas=N` each call is followed on its own connection by `WAIT N timeout`,
and a write fewer than N replicas acknowledged in time is `XJOBS_BACKEND_UNAVAILABLE` (the
caller retries; every script tolerates a re-run), so what xjobs acknowledged is on N replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from xjobs.errors import BackendUnavailableError
from xjobs_redis.errors import RedisUrlInvalidError

DEFAULT_WAIT_TIMEOUT_MS: Final = 1000
# The query options this module reads off a Redis URL (redis-py would refuse them).
OPTIONS: Final = ("wait_replicas", "wait_timeout_ms")


@dataclass(frozen=True, slots=True)
class Replication:
    """How many replicas must acknowledge each call's writes, and how long to wait for them."""

    replicas: int
    timeout_ms: int = DEFAULT_WAIT_TIMEOUT_MS

    def command(self) -> tuple[str, int, int]:
        """The `WAIT` command that follows each call on the same connection."""
        return ("WAIT", self.replicas, self.timeout_ms)

    def check(self, acknowledged: object) -> None:
        """Refuse a call whose writes fewer than `replicas` replicas acknowledged in time."""
        if isinstance(acknowledged, BaseException):
            raise acknowledged
        if not isinstance(acknowledged, int) or acknowledged < self.replicas:
            raise BackendUnavailableError(
                f"a write reached {acknowledged} of the {self.replicas} replicas wait_replicas "
                f"asks for within {self.timeout_ms} ms; a failover now could lose it: retry"
            )


def choose_replication(
    query: dict[str, str], replicas: int | None, timeout_ms: int | None, *, cluster: bool
) -> Replication | None:
    """The `Replication` the URL's query (`wait_replicas`, `wait_timeout_ms`) and the keywords ask
    for (both may name it only if they agree), or `None` for none; refused on a Cluster."""
    wanted = _agree("wait_replicas", _number(query, "wait_replicas"), replicas)
    timeout = _agree("wait_timeout_ms", _number(query, "wait_timeout_ms"), timeout_ms)
    if timeout is not None and timeout <= 0:
        raise RedisUrlInvalidError(f"wait_timeout_ms must be a positive number (got {timeout})")
    if not wanted:
        return None
    if cluster:
        raise RedisUrlInvalidError(
            "wait_replicas needs one primary that answers WAIT for every write: use it with "
            "redis:// or redis+sentinel://, not a Redis Cluster"
        )
    return Replication(wanted, timeout or DEFAULT_WAIT_TIMEOUT_MS)


def _number(query: dict[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    if not text.isdigit():
        raise RedisUrlInvalidError(f"{name} must be a whole number (got {text!r})")
    return int(text)


def _agree(name: str, from_url: int | None, argument: int | None) -> int | None:
    if argument is not None and (isinstance(argument, bool) or argument < 0):
        raise RedisUrlInvalidError(f"{name} must be a whole number >= 0 (got {argument!r})")
    if from_url is not None and argument is not None and from_url != argument:
        raise RedisUrlInvalidError(
            f"the URL names {name}={from_url} and the keyword {name}={argument}; pass one"
        )
    return from_url if from_url is not None else argument
