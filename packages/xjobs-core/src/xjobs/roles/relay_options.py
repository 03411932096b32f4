"""`RelayOptions`: the relay's batch, its claim lease, its poll floor and its drain, validated once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict, Unpack

from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms, finite_count

DEFAULT_BATCH = 100
MAX_BATCH = 10_000
DEFAULT_RELAY_LEASE = timedelta(seconds=30)
DEFAULT_RELAY_POLL_FLOOR = timedelta(milliseconds=50)
DEFAULT_RELAY_DRAIN_TIMEOUT = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class RelayOptions:
    """A relay's resolved options, in milliseconds."""

    batch: int
    lease_ms: int
    poll_floor_ms: int
    drain_timeout_ms: int


class RelayKwargs(TypedDict, total=False):
    """The knobs `App.relay` and `App.run_relay` pass through, each with its default below."""

    batch: int
    lease: timedelta
    poll_floor: timedelta
    drain_timeout: timedelta


def resolve_relay_options(**knobs: Unpack[RelayKwargs]) -> RelayOptions:
    """Validate each option under its own name (`XJOBS_OPTION_INVALID` naming it).

    Defaults: 100 rows a pass, a 30 s claim lease (a crashed relay's rows are retaken after
    it), a 50 ms poll floor doubling to the idle ceiling, a 30 s drain.
    """
    lease_ms = duration_ms("lease", knobs.get("lease", DEFAULT_RELAY_LEASE))
    if lease_ms < 300:
        raise OptionInvalidError(f"lease must be at least 300 ms, got {lease_ms} ms")
    return RelayOptions(
        batch=finite_count(
            "batch", knobs.get("batch", DEFAULT_BATCH), minimum=1, maximum=MAX_BATCH
        ),
        lease_ms=lease_ms,
        poll_floor_ms=duration_ms("poll_floor", knobs.get("poll_floor", DEFAULT_RELAY_POLL_FLOOR)),
        drain_timeout_ms=duration_ms(
            "drain_timeout",
            knobs.get("drain_timeout", DEFAULT_RELAY_DRAIN_TIMEOUT),
            allow_zero=True,
        ),
    )
