"""The `RateStore` protocol: fleet-wide rate permits, GCRA buckets taken all-or-nothing, on the store's clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

# A reservation is granted only while it leaves at least this share of every bucket's burst free.
RESERVE_ROOM: Final = 0.5


@dataclass(frozen=True, slots=True)
class RateBucket:
    """One GCRA bucket: its key, the emission interval `interval_ms` (period / limit) and `burst`.

    The stored state is one instant per key, the theoretical arrival time (TAT). A permit is free
    at `now` when `TAT - now <= (burst - 1) * interval_ms`; taking it moves the TAT to
    `max(TAT, now) + interval_ms`. A bucket idle since its TAT has all `burst` permits.

    Beside it a full bucket keeps its deferral LINE: the instant the next refused run is due. A
    refused run is due at the later of the next free permit and the line, and the line moves one
    interval past it, so runs refused one after another come back an interval apart instead of
    all at once (the claim never spins on a herd). A free permit is granted whatever the line.
    """

    key: str
    interval_ms: float
    burst: int


def reserve_ceiling_ms(bucket: RateBucket) -> float:
    """How far past now a reservation may move the bucket's TAT: `RESERVE_ROOM` of its burst."""
    return bucket.burst * bucket.interval_ms * RESERVE_ROOM


@dataclass(frozen=True, slots=True)
class RateVerdict:
    """A permit of every bucket was taken (`granted`), or none was and `wait_ms` is when all are free."""

    granted: bool
    wait_ms: int = 0


@runtime_checkable
class RateStore(Protocol):
    """Rate permits shared by every worker of the fleet; each call is one atomic step.

    A permit for a run that STARTED stays spent (there is nothing to release); a permit for a run
    that never started is `abandon`ed: handed back, once per grant.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        """Take one permit of every bucket, or none: refused, `wait_ms` (at least 1) is how long
        from now until the run's turn: the latest, over the full buckets, of the next free permit
        and the bucket's line (each full bucket's line then moves one interval past it)."""
        ...

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        """Acquire each grant in turn, in one atomic step at one instant: verdict i is what
        `acquire(grants[i])` would answer right after grants 0..i-1 (grant i sees their TATs and
        lines). Each grant is all-or-none; a refused grant takes no permit (it moves its full
        buckets' lines, as `acquire` does) and the grants after it are still evaluated."""
        ...

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        """Take `count` permits of every bucket (keys distinct) at once, held ahead by one process
        that starts each within `hold_ms` of asking, or none. The held permits are placed from
        `now + hold_ms` on: each TAT moves to `max(TAT, now + hold_ms) + count * interval_ms`, so a
        permit started at any instant of its hold is one GCRA would have granted then, and the
        burst bound holds. Granted only while every bucket's TAT then stays within
        `reserve_ceiling_ms` of now (half its burst left to the per-run grants); refused, nothing
        moves, not even a line."""
        ...

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        """Hand back the permit a grant of `buckets` took: each TAT moves back one interval, never
        before now (a bucket refills no faster than idle)."""
        ...

    async def spent(self, key: str, interval_ms: float) -> float:
        """How many permits of bucket `key` are spent now (`(TAT - now) / interval_ms`, 0 when idle)."""
        ...


@runtime_checkable
class InProcessRates(RateStore, Protocol):
    """A rate store in the worker's own process (memory): no round trip to save, so a worker asks
    it synchronously, per run, with no batch and no permits held ahead."""

    def grant_now(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        """What `acquire(buckets)` answers, answered at once."""
        ...
