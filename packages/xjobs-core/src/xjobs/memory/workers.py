"""The memory worker registry: one row per live worker process, expiring after its TTL."""

from __future__ import annotations

from dataclasses import replace

from xjobs.clock import Clock
from xjobs.contract.stores import WorkerInfo


class MemoryWorkerRegistry:
    """Worker rows in a dict, each with its expiry."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[str, tuple[WorkerInfo, int]] = {}

    async def announce(self, info: WorkerInfo, ttl_ms: int) -> None:
        now = self._clock.now_ms()
        self._rows[info.id] = (replace(info, last_seen_ms=now), now + ttl_ms)

    async def beat(self, worker_id: str, ttl_ms: int) -> bool:
        return self.refresh(worker_id, ttl_ms)

    def refresh(self, worker_id: str, ttl_ms: int) -> bool:
        """Extend an unexpired row (the claim calls this with `presence_ttl_ms`)."""
        now = self._clock.now_ms()
        found = self._rows.get(worker_id)
        if found is None or found[1] <= now:
            return False
        self._rows[worker_id] = (replace(found[0], last_seen_ms=now), now + ttl_ms)
        return True

    async def forget(self, worker_id: str) -> None:
        self._rows.pop(worker_id, None)

    async def list(self) -> list[WorkerInfo]:
        now = self._clock.now_ms()
        for worker_id in [w for w, (_, expires) in self._rows.items() if expires <= now]:
            del self._rows[worker_id]
        return [self._rows[w][0] for w in sorted(self._rows)]

    def purge(self, before_ms: int, limit: int) -> int:
        """Delete at most `limit` rows that expired before `before_ms`, oldest expiry first."""
        stale = sorted((e, w) for w, (_, e) in self._rows.items() if e < before_ms)[:limit]
        for _, worker_id in stale:
            del self._rows[worker_id]
        return len(stale)

    def stale(self, before_ms: int) -> int:
        """How many rows expired before `before_ms`."""
        return sum(1 for _, e in self._rows.values() if e < before_ms)
