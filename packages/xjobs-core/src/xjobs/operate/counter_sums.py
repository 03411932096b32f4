"""Counter buckets summed over a window, coarse tiers first, without counting a minute twice.

Counters move per minute; the scheduler leader folds every closed minute into its hour and day
(all closed minutes at once, in time order). So every hour bucket before the LATEST hour bucket
is whole, and the minutes from the start of that hour on hold what is not folded yet. A window
reads days before the latest day bucket, then hours before the latest hour bucket, then
minutes: few rows for a long window, exact to the minute at its recent end, and right even when
nothing was ever folded (then it reads minutes only).

A window starts at the start of the bucket of its coarsest tier that holds `now - since`: to
the minute up to `MINUTES_UP_TO`, the hour up to `HOURS_UP_TO`, the day beyond.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from xjobs.contract.introspection import HOUR_MS, CounterBucket, CounterTier, bucket_of

MINUTES_UP_TO = 6 * HOUR_MS
HOURS_UP_TO = 14 * 24 * HOUR_MS
TIERS: tuple[CounterTier, ...] = ("day", "hour", "minute")

Reader = Callable[[CounterTier, int], Awaitable[list[CounterBucket]]]


@dataclass(slots=True)
class Window:
    """The counts of a window `[start_ms, until_ms]` per `(name, outcome)`, and the tiers read."""

    start_ms: int
    until_ms: int
    tiers: list[CounterTier] = field(default_factory=list)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def add(self, bucket: CounterBucket) -> None:
        """Count one bucket into the window."""
        key = (bucket.name, bucket.outcome)
        self.counts[key] = self.counts.get(key, 0) + bucket.count


def coarsest_tier(since_ms: int) -> CounterTier:
    """The coarsest tier a window of this length reads."""
    if since_ms <= MINUTES_UP_TO:
        return "minute"
    return "hour" if since_ms <= HOURS_UP_TO else "day"


async def window(read: Reader, now_ms: int, since_ms: int) -> Window:
    """The counts of the last `since_ms` before `now_ms`; `read(tier, from_ms)` reads one tier."""
    coarsest = coarsest_tier(since_ms)
    start = bucket_of(max(now_ms - since_ms, 0), coarsest)
    out = Window(start_ms=start, until_ms=now_ms)
    cut = start
    for tier in TIERS[TIERS.index(coarsest) :]:
        buckets = await read(tier, cut)
        out.tiers.append(tier)
        if tier == "minute":
            for b in buckets:
                out.add(b)
            break
        if not buckets:
            continue
        latest = max(b.bucket_ms for b in buckets)
        for b in buckets:
            if b.bucket_ms < latest:
                out.add(b)
        cut = latest
    return out
