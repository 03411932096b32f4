"""The rate scripts' calls: GCRA buckets, every one under the one rate hash tag."""

from __future__ import annotations

import json
from collections.abc import Sequence

from xjobs.contract.rates import RateBucket, reserve_ceiling_ms
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def rate_acquire(k: Keys, *, now: str, grants: Sequence[Sequence[RateBucket]]) -> Call:
    """Take each grant's permits in turn, each all or none: every bucket key once in KEYS, each
    grant as JSON of its buckets' key index (1-based), interval and burst."""
    index: dict[str, int] = {}
    rows: list[Arg] = []
    for buckets in grants:
        row = [
            [index.setdefault(b.key, len(index) + 1), float(b.interval_ms), b.burst]
            for b in buckets
        ]
        rows.append(json.dumps(row))
    return Call("rate_acquire", [k.rate(key) for key in index], [now, *rows])


def rate_reserve(
    k: Keys, *, now: str, buckets: Sequence[RateBucket], count: int, hold_ms: int
) -> Call:
    """Take `count` permits of every bucket ahead, for a hold of `hold_ms`, or none."""
    rows = [json.dumps([float(b.interval_ms), reserve_ceiling_ms(b)]) for b in buckets]
    return Call(
        "rate_reserve", [k.rate(b.key) for b in buckets], [now, str(count), str(hold_ms), *rows]
    )


def rate_abandon(k: Keys, *, now: str, buckets: Sequence[RateBucket]) -> Call:
    """Hand back the permit a grant of `buckets` took."""
    args: list[Arg] = [now, *(repr(float(b.interval_ms)) for b in buckets)]
    return Call("rate_abandon", [k.rate(b.key) for b in buckets], args)


def rate_spent(k: Keys, *, now: str, key: str) -> Call:
    """Read how far ahead of now one bucket's TAT is."""
    return Call("rate_spent", [k.rate(key)], [now])
