"""Counters: the settling scripts' minute buckets read across queues, and the rollup into hour and day.

Every settling script (`ack`, `nack`, the claim's burial, `cancel`, an event park) moves its job's
minute counter in its own step, on its queue's slot (`count_ending` in `lib.lua`). Each tier of a
queue is a HASH `bucket_ms|outcome|name` -> count with an index ZSET of its fields by bucket.

Retention (a tier's fields past it are trimmed; its keys also expire that long after their newest
bucket, so an idle queue leaves nothing behind): minute 2 days, hour 30 days, day 365 days. A new
minute field clears up to two expired ones, so the minute tier stays bounded even where no
scheduler ever runs a rollup; the rollup trims every tier.
"""

from __future__ import annotations

from typing import Final

from xjobs.contract.introspection import DAY_MS, CounterBucket, CounterTier
from xjobs_redis.calls import operator as calls
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys

RETENTION_MS: Final[dict[str, int]] = {
    "minute": 2 * DAY_MS,
    "hour": 30 * DAY_MS,
    "day": 365 * DAY_MS,
}


def decode_field(field: str) -> tuple[int, str, str]:
    """A counter field's (bucket_ms, outcome, name)."""
    bucket, outcome, name = field.split("|", 2)
    return int(bucket), outcome, name


async def read_counters(
    executor: Executor, keys: Keys, queues: list[str], tier: CounterTier, since_ms: int
) -> list[CounterBucket]:
    """The buckets of `tier` from `since_ms` on, summed across `queues` (one round trip)."""
    batch = [calls.counters_read(keys, queue=q, tier=tier, since_ms=since_ms) for q in queues]
    totals: dict[tuple[int, str, str], int] = {}
    for flat in await executor.batch(batch):
        for i in range(0, len(flat), 2):
            bucket, outcome, name = decode_field(str(flat[i]))
            key = (bucket, name, outcome)
            totals[key] = totals.get(key, 0) + int(flat[i + 1])
    return [
        CounterBucket(tier, bucket, name, outcome, count)
        for (bucket, name, outcome), count in sorted(totals.items())
        if count > 0 and bucket >= since_ms
    ]


async def roll_up(executor: Executor, keys: Keys, queues: list[str], now_ms: int) -> int:
    """Fold every queue's closed minute buckets (one script per queue, one round trip); answers
    how many distinct minute buckets were folded."""
    batch = [calls.counters_rollup(keys, queue=q, now_ms=now_ms) for q in queues]
    folded: set[int] = set()
    for buckets in await executor.batch(batch):
        folded.update(int(b) for b in buckets)
    return len(folded)
