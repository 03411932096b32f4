"""`SchedulerOptions`: the leader lease, its renewal, the misfire grace and the drain, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict, Unpack

from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms

DEFAULT_LEADER_TTL = timedelta(seconds=30)
DEFAULT_RENEW_EVERY = timedelta(seconds=10)
DEFAULT_MISFIRE_GRACE = timedelta(seconds=60)
DEFAULT_DRAIN_TIMEOUT = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """A scheduler's resolved options, in milliseconds."""

    leader_ttl_ms: int
    renew_every_ms: int
    misfire_grace_ms: int
    drain_timeout_ms: int

    @property
    def pause_recheck_ms(self) -> int:
        """How often a due but paused task asks again whether it was resumed."""
        return self.renew_every_ms * 3


class SchedulerKwargs(TypedDict, total=False):
    """The knobs `App.scheduler` and `App.run_scheduler` pass through, each with its default below."""

    leader_ttl: timedelta
    renew_every: timedelta
    misfire_grace: timedelta
    drain_timeout: timedelta


def resolve_scheduler_options(**knobs: Unpack[SchedulerKwargs]) -> SchedulerOptions:
    """Validate each option under its own name (`XJOBS_OPTION_INVALID` naming it).

    Defaults: a 30 s leader lease renewed every 10 s (6 statements per idle minute), a 60 s
    misfire grace, a 30 s drain. The renewal must leave the lease time to be renewed: at most
    half of it.
    """
    ttl_ms = duration_ms("leader_ttl", knobs.get("leader_ttl", DEFAULT_LEADER_TTL))
    renew_ms = duration_ms("renew_every", knobs.get("renew_every", DEFAULT_RENEW_EVERY))
    if renew_ms * 2 > ttl_ms:
        raise OptionInvalidError(
            f"renew_every ({renew_ms} ms) must be at most half of leader_ttl ({ttl_ms} ms)"
        )
    return SchedulerOptions(
        leader_ttl_ms=ttl_ms,
        renew_every_ms=renew_ms,
        misfire_grace_ms=duration_ms(
            "misfire_grace", knobs.get("misfire_grace", DEFAULT_MISFIRE_GRACE), allow_zero=True
        ),
        drain_timeout_ms=duration_ms(
            "drain_timeout", knobs.get("drain_timeout", DEFAULT_DRAIN_TIMEOUT), allow_zero=True
        ),
    )
