"""A window of counters reads coarse tiers first and never counts a minute twice."""

from __future__ import annotations

import pytest

from xjobs.contract.introspection import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    CounterBucket,
    CounterTier,
    bucket_of,
)
from xjobs.operate.counter_sums import coarsest_tier, window

NOW = 40 * DAY_MS + 5 * HOUR_MS + 30 * MINUTE_MS + 12_345


class Tiers:
    """A fake `counters(tier, since_ms)` over fixed buckets, recording what was read."""

    def __init__(self, **tiers: list[tuple[int, int]]) -> None:
        self.tiers = {
            tier: [CounterBucket(tier, at, "send", "completed", n) for at, n in buckets]  # type: ignore[arg-type]
            for tier, buckets in tiers.items()
        }
        self.reads: list[tuple[str, int]] = []

    async def __call__(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        self.reads.append((tier, since_ms))
        return [b for b in self.tiers.get(tier, []) if b.bucket_ms >= since_ms]


def _total(counts: dict[tuple[str, str], int]) -> int:
    return counts.get(("send", "completed"), 0)


@pytest.mark.parametrize(
    ("since", "tier"),
    [
        (MINUTE_MS, "minute"),
        (6 * HOUR_MS, "minute"),
        (7 * HOUR_MS, "hour"),
        (14 * DAY_MS, "hour"),
        (15 * DAY_MS, "day"),
    ],
)
def test_the_window_length_picks_the_coarsest_tier(since: int, tier: str) -> None:
    assert coarsest_tier(since) == tier


@pytest.mark.asyncio
async def test_a_short_window_reads_minutes_from_the_minute_it_starts_in() -> None:
    start = bucket_of(NOW - HOUR_MS)
    read = Tiers(minute=[(start - MINUTE_MS, 100), (start, 1), (bucket_of(NOW), 2)])

    win = await window(read, NOW, HOUR_MS)

    assert (win.start_ms, win.until_ms, win.tiers) == (start, NOW, ["minute"])
    assert read.reads == [("minute", start)]
    assert _total(win.counts) == 3


@pytest.mark.asyncio
async def test_hours_before_the_latest_hour_then_the_minutes_from_it() -> None:
    latest = bucket_of(NOW, "hour") - HOUR_MS
    hours = [(latest - 2 * HOUR_MS, 10), (latest - HOUR_MS, 20), (latest, 5)]
    minutes = [
        (latest - 2 * HOUR_MS, 10),  # folded long ago, read from its hour instead
        (latest + MINUTE_MS, 3),  # folded into the latest hour (5 = 3 + 2)
        (latest + 2 * MINUTE_MS, 2),
        (bucket_of(NOW), 7),  # not folded yet
    ]
    read = Tiers(hour=hours, minute=minutes)

    win = await window(read, NOW, 2 * DAY_MS)

    assert win.tiers == ["hour", "minute"]
    assert win.start_ms == bucket_of(NOW - 2 * DAY_MS, "hour")
    assert read.reads == [("hour", win.start_ms), ("minute", latest)]
    assert _total(win.counts) == 10 + 20 + 3 + 2 + 7


@pytest.mark.asyncio
async def test_with_nothing_ever_folded_every_minute_counts() -> None:
    start = bucket_of(NOW - 2 * DAY_MS, "hour")
    read = Tiers(minute=[(start, 1), (start + HOUR_MS, 2), (bucket_of(NOW), 4)])

    win = await window(read, NOW, 2 * DAY_MS)

    assert read.reads == [("hour", start), ("minute", start)]
    assert _total(win.counts) == 7


@pytest.mark.asyncio
async def test_days_then_hours_then_minutes() -> None:
    latest_day = bucket_of(NOW, "day")
    latest_hour = bucket_of(NOW, "hour") - HOUR_MS
    read = Tiers(
        day=[(latest_day - DAY_MS, 100), (latest_day, 9)],
        hour=[(latest_day - DAY_MS, 100), (latest_day, 4), (latest_hour, 5)],
        minute=[(latest_day, 4), (latest_hour, 5), (bucket_of(NOW), 1)],
    )

    win = await window(read, NOW, 30 * DAY_MS)

    assert win.tiers == ["day", "hour", "minute"]
    assert read.reads == [
        ("day", bucket_of(NOW - 30 * DAY_MS, "day")),
        ("hour", latest_day),
        ("minute", latest_hour),
    ]
    assert _total(win.counts) == 100 + 4 + 5 + 1
