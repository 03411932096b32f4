"""The rate store: one GCRA theoretical arrival time (and deferral line) per bucket key in `rates`.

Each call is one write transaction: it reads the rows of its keys, applies the contract's rule
(`xjobs.contract.rates.RateBucket`) on the injected clock, and writes back what moved.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

from xjobs.contract.rates import RateBucket, RateVerdict, reserve_ceiling_ms
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


class _Buckets:
    """The TATs and lines of some keys at one instant, as read; `save` writes back the moved ones."""

    def __init__(self, conn: Connection, keys: Iterable[str], now: float) -> None:
        self.now = now
        wanted = sorted(set(keys))
        rows = conn.execute(sql("rate_rows"), {"keys": json.dumps(wanted)}).fetchall()
        self._tat = {str(r[0]): float(r[1]) for r in rows}
        self._line = {str(r[0]): float(r[2]) for r in rows}
        self._moved: set[str] = set()

    def tat(self, key: str) -> float:
        """The key's TAT, never before now (an idle bucket is a full one)."""
        return max(self._tat.get(key, self.now), self.now)

    def line(self, key: str) -> float:
        return self._line.get(key, 0.0)

    def set(self, key: str, *, tat: float | None = None, line: float | None = None) -> None:
        if tat is not None:
            self._tat[key] = tat
        if line is not None:
            self._line[key] = line
        self._moved.add(key)

    def grant(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        """One permit of every bucket, or none: the full buckets' lines move past the run's turn."""
        now = self.now
        free = {b.key: self.tat(b.key) - (b.burst - 1) * b.interval_ms for b in buckets}
        full = [b for b in buckets if free[b.key] > now]
        if not full:
            for b in buckets:
                self.set(b.key, tat=self.tat(b.key) + b.interval_ms)
            return RateVerdict(True)
        due = max(max(free[b.key], self.line(b.key)) for b in full)
        for b in full:
            self.set(b.key, line=max(self.line(b.key), due + b.interval_ms))
        return RateVerdict(False, max(math.ceil(due - now), 1))

    def save(self, conn: Connection) -> None:
        for key in sorted(self._moved):
            tat, line = self._tat.get(key, self.now), self._line.get(key, 0.0)
            if tat <= self.now and line <= self.now:
                conn.execute(sql("rate_drop"), {"key": key})
            else:
                conn.execute(sql("rate_put"), {"key": key, "tat_ms": tat, "line_ms": line})


def _acquire_many(
    conn: Connection, grants: Sequence[Sequence[RateBucket]], now: float
) -> list[RateVerdict]:
    state = _Buckets(conn, (b.key for grant in grants for b in grant), now)
    verdicts = [state.grant(grant) for grant in grants]
    state.save(conn)
    return verdicts


def _reserve(
    conn: Connection, buckets: Sequence[RateBucket], count: int, hold_ms: int, now: float
) -> bool:
    state = _Buckets(conn, (b.key for b in buckets), now)
    start = now + hold_ms
    tats = {b.key: max(state.tat(b.key), start) + count * b.interval_ms for b in buckets}
    if any(tats[b.key] - now > reserve_ceiling_ms(b) for b in buckets):
        return False
    for key, tat in tats.items():
        state.set(key, tat=tat)
    state.save(conn)
    return True


def _abandon(conn: Connection, buckets: Sequence[RateBucket], now: float) -> None:
    state = _Buckets(conn, (b.key for b in buckets), now)
    for b in buckets:
        state.set(b.key, tat=max(state.tat(b.key) - b.interval_ms, now))
    state.save(conn)


class SqliteRateStore:
    """`RateStore` over `rates`, on the injected clock; each call one write transaction."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def acquire(self, buckets: Sequence[RateBucket]) -> RateVerdict:
        """One permit of every bucket, or none and how long until the run's turn."""
        (verdict,) = await self.acquire_many([buckets])
        return verdict

    async def acquire_many(self, grants: Sequence[Sequence[RateBucket]]) -> list[RateVerdict]:
        """Each grant in turn at one instant, in one transaction."""
        if not grants:
            return []
        now = float(self._x.now())
        return await self._x.write(lambda conn: _acquire_many(conn, grants, now))

    async def reserve(self, buckets: Sequence[RateBucket], count: int, hold_ms: int) -> bool:
        """`count` permits of every bucket held ahead from `now + hold_ms`, or none."""
        now = float(self._x.now())
        return await self._x.write(lambda conn: _reserve(conn, buckets, count, hold_ms, now))

    async def abandon(self, buckets: Sequence[RateBucket]) -> None:
        """Hand back a grant's permit: each TAT one interval back, never before now."""
        now = float(self._x.now())
        await self._x.write(lambda conn: _abandon(conn, buckets, now))

    async def spent(self, key: str, interval_ms: float) -> float:
        """How many permits of `key` are spent now."""
        now = float(self._x.now())

        def read(conn: Connection) -> float:
            return (_Buckets(conn, [key], now).tat(key) - now) / interval_ms

        return await self._x.read(read)
