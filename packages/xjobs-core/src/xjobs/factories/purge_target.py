"""`StoreTarget`: one store of a backend's `RetentionStore` purged as one target of the purge job,
in batches paced by the policy's duty cycle."""

from __future__ import annotations

from asyncio import sleep
from collections.abc import Callable
from datetime import timedelta
from time import monotonic

from xjobs.contract.retention import (
    DEFAULT_PURGE_BATCH,
    MAX_BATCHES_PER_PASS,
    MAX_PURGE_BATCH,
    PurgeCut,
    PurgeStore,
    RetentionStore,
    pacing_duty,
)
from xjobs.options import duration_ms, finite_count


class StoreTarget:
    """A `PurgeTarget` over one store of a backend's `RetentionStore`: batches until a short one."""

    def __init__(
        self,
        store: PurgeStore,
        retention: Callable[[], RetentionStore],
        cut: Callable[[int], PurgeCut],
        batch: int = DEFAULT_PURGE_BATCH,
        pause: timedelta = timedelta(0),
        duty: float = 1.0,
    ) -> None:
        self._store: PurgeStore = store
        self._retention = retention
        self._cut = cut
        self._batch = finite_count("purge batch", batch, minimum=1, maximum=MAX_PURGE_BATCH)
        self._pause_s = duration_ms("purge pause", pause, allow_zero=True) / 1000
        duty = pacing_duty(duty)
        self._rest_per_s = (1 - duty) / duty  # seconds of rest per second of batch

    @property
    def name(self) -> str:
        """The store's name."""
        return self._store

    async def purge_expired(self, now_ms: int) -> int:
        """Batches of `batch` rows until one comes back short (or the pass's batch bound), each
        followed by a rest of its own duration × (1 − duty) / duty, at least `pause`."""
        store, cut = self._retention(), self._cut(now_ms)
        total = 0
        for _ in range(MAX_BATCHES_PER_PASS):
            started = monotonic()
            gone = await store.purge(self._store, cut, self._batch)
            total += gone
            if gone < self._batch:
                break
            rest = max((monotonic() - started) * self._rest_per_s, self._pause_s)
            if rest > 0:
                await sleep(rest)
        return total

    async def count_expired(self, now_ms: int) -> int:
        """The store's dry run at the pass's cut."""
        return await self._retention().expired(self._store, self._cut(now_ms))
