"""Rate grants of one worker sent together: the grants asked in one event-loop turn go to the store as ONE `acquire_many`.

The first grant schedules the call for the end of its turn, so every grant asked in that turn
(the runs of one claim batch) joins it, in the order asked; the grants asked while a call is in
flight go in the next (group commit, as the ack batcher does). Each grant keeps its own answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from xjobs.contract.rates import RateBucket, RateStore, RateVerdict

log = logging.getLogger("xjobs.run.rate_batch")

MAX_BATCH = 500

Pending = tuple[tuple[RateBucket, ...], asyncio.Future[RateVerdict]]


class GrantBatch:
    """`acquire` one grant through the store's `acquire_many`, batched with the grants beside it.

    A grant whose asker was cancelled while its call was out is handed back (`abandon`): no run
    will start on it.
    """

    def __init__(self, store: RateStore, max_batch: int = MAX_BATCH) -> None:
        self._store = store
        self._max_batch = max_batch
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def acquire(self, buckets: tuple[RateBucket, ...]) -> RateVerdict:
        """Take one permit of every bucket, or none, in the store call of this turn's batch."""
        answer: asyncio.Future[RateVerdict] = asyncio.get_running_loop().create_future()
        self._pending.append((buckets, answer))
        if self._flusher is None:
            self._flusher = asyncio.ensure_future(self._flush())
        return await answer

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._send(batch)
        except asyncio.CancelledError:
            for _, answer in self._pending:
                answer.cancel()
            self._pending.clear()
            raise
        finally:
            self._flusher = None

    async def _send(self, batch: Sequence[Pending]) -> None:
        try:
            verdicts = await self._store.acquire_many([buckets for buckets, _ in batch])
            if len(verdicts) != len(batch):
                raise RuntimeError(f"acquire_many answered {len(verdicts)} of {len(batch)} grants")
        except asyncio.CancelledError:
            for _, answer in batch:
                answer.cancel()
            raise
        except Exception as exc:
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
            return
        orphans = []
        for (buckets, answer), verdict in zip(batch, verdicts, strict=True):
            if not answer.done():
                answer.set_result(verdict)
            elif verdict.granted:
                orphans.append(buckets)
        for buckets in orphans:
            await self._give_back(buckets)

    async def _give_back(self, buckets: tuple[RateBucket, ...]) -> None:
        try:
            await self._store.abandon(buckets)
        except Exception:
            log.warning("jobs.worker.rate-abandon-failed", exc_info=True)
