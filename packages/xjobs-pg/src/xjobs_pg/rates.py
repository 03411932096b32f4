"""The Postgres rate store: a GCRA TAT row per bucket key in `<schema>.rates`, the grants of a batch taken in one statement."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import asyncpg

from xjobs.contract.rates import RateBucket, RateVerdict, reserve_ceiling_ms
from xjobs.errors import BackendError
from xjobs_pg.executor import Executor
from xjobs_pg.params import Bound, One

# A key without a row is given one, then asked again; a row deleted each time in between is a fault.
ENSURE_TRIES = 3

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RateParams:
    """`rate_abandon`: $1 now, $2 keys, $3 intervals."""

    now_ms: int | None
    buckets: Sequence[RateBucket]

    def bind(self) -> Bound:
        return (
            self.now_ms,
            [b.key for b in self.buckets],
            [float(b.interval_ms) for b in self.buckets],
        )


@dataclass(frozen=True, slots=True)
class GrantsParams:
    """`rate_acquire`: $1 now, then every bucket of every grant flattened: $2 its grant (from 1),
    $3 keys, $4 intervals, $5 bursts."""

    now_ms: int | None
    grants: Sequence[Sequence[RateBucket]]

    def bind(self) -> Bound:
        flat = [(n, b) for n, grant in enumerate(self.grants, 1) for b in grant]
        return (
            self.now_ms,
            [n for n, _ in flat],
            [b.key for _, b in flat],
            [float(b.interval_ms) for _, b in flat],
            [b.burst for _, b in flat],
        )


@dataclass(frozen=True, slots=True)
class ReserveParams:
    """`rate_reserve`: $1 now, $2 keys, $3 intervals, $4 ceilings, $5 count, $6 hold."""

    now_ms: int | None
    buckets: Sequence[RateBucket]
    count: int
    hold_ms: int

    def bind(self) -> Bound:
        return (
            self.now_ms,
            [b.key for b in self.buckets],
            [float(b.interval_ms) for b in self.buckets],
            [reserve_ceiling_ms(b) for b in self.buckets],
            self.count,
            self.hold_ms,
        )


@dataclass(frozen=True, slots=True)
class SpentParams:
    """`rate_spent`: $1 now, $2 key, $3 the emission interval."""

    now_ms: int | None
    key: str
    interval_ms: float

    def bind(self) -> Bound:
        return (self.now_ms, self.key, float(self.interval_ms))


class PostgresRateStore:
    """Acquirers of one bucket serialise on its row, locked in key order; the grants of one
    `acquire_many` are one statement (two when one is refused), each key's row locked once."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        return (await self.acquire_many([buckets]))[0]

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        asked = [grant for grant in grants if grant]  # an empty grant takes nothing: granted
        answers = iter(await self._take(asked) if asked else [])
        return [next(answers) if grant else RateVerdict(True) for grant in grants]

    async def _take(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        """All at once when every grant is free (one statement), else in turn (a second one)."""
        params = GrantsParams(self._x.now(), grants)

        async def attempt() -> list[RateVerdict] | None:
            row = await self._x.fetchrow("rate_acquire_all", params)
            if row is not None and row["taken"]:
                return [RateVerdict(True) for _ in grants]
            if row is not None and row["complete"]:
                rows = await self._x.fetch("rate_acquire", params)
                if rows[0]["complete"]:
                    return [_verdict(r) for r in rows]
            return None

        return await self._with_rows({b.key for grant in grants for b in grant}, attempt)

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        if not buckets:
            return True
        params = ReserveParams(self._x.now(), buckets, count, hold_ms)

        async def attempt() -> bool | None:
            row = await self._x.fetchrow("rate_reserve", params)
            return bool(row["taken"]) if row is not None and row["complete"] else None

        return await self._with_rows({b.key for b in buckets}, attempt)

    async def _with_rows(self, keys: set[str], attempt: Callable[[], Awaitable[T | None]]) -> T:
        """`attempt` answers None when a key had no row to lock: each such key gets an idle one
        and it is asked again."""
        for _ in range(ENSURE_TRIES):
            answer = await attempt()
            if answer is not None:
                return answer
            await self._x.execute("rate_ensure", One(sorted(keys)))
        raise BackendError(f"the rate rows of {sorted(keys)} vanish as soon as they are made")

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        if buckets:
            await self._x.execute("rate_abandon", RateParams(self._x.now(), buckets))

    async def spent(self, key: str, interval_ms: float) -> float:
        row = await self._x.fetchrow("rate_spent", SpentParams(self._x.now(), key, interval_ms))
        return 0.0 if row is None else float(row["spent"])


def _verdict(row: asyncpg.Record) -> RateVerdict:
    if not row["refused"]:
        return RateVerdict(True)
    return RateVerdict(False, max(math.ceil(row["due_ms"] - row["now_ms"]), 1))
