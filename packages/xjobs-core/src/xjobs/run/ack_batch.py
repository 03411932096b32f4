"""Acks of one worker settled together: a backend that declares `ack_many` lands every ack waiting in one call.

The first ack never waits for company; the acks that arrive while a call is in flight go in the
next, so batches grow only under load (group commit). Each ack keeps its own fence and answer;
a batch that fails is retried one ack at a time. A driver whose calls never leave the process
(`in_process`, the memory driver) has no round trip to share: its acks go straight through.
"""

from __future__ import annotations

import asyncio

from xjobs.contract.backend import Backend
from xjobs.contract.driver import BatchAck, Claim

MAX_BATCH = 500


class AckBatcher:
    """`ack` through the driver's `ack_many` when the backend declares it, else straight through `ack`."""

    def __init__(self, backend: Backend, max_batch: int = MAX_BATCH) -> None:
        driver = backend.jobs
        self._driver = driver
        self._batched: BatchAck | None = None
        in_process = getattr(driver, "in_process", False) is True
        if "ack_many" in backend.capabilities and isinstance(driver, BatchAck) and not in_process:
            self._batched = driver
        self._max_batch = max_batch
        self._pending: list[tuple[Claim, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    @property
    def batches(self) -> bool:
        """Whether acks go through `ack_many` together (else each is the driver's own `ack`)."""
        return self._batched is not None

    async def ack(self, claim: Claim) -> bool:
        """Ack one completed run, batched with the acks waiting beside it; answers if its fence held."""
        if self._batched is None:
            return await self._driver.ack(claim)
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((claim, answer))
        if self._flusher is None:
            self._flusher = asyncio.ensure_future(self._flush(self._batched))
        return await answer

    async def _flush(self, driver: BatchAck) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    landed = await driver.ack_many([claim for claim, _ in batch])
                except asyncio.CancelledError as exc:
                    _answer_all(batch, exc)
                    raise
                except Exception:
                    # A connection a restart left dead fails the whole batch: each ack is tried
                    # on its own, as without batching (a repeat of a landed ack misses its fence).
                    await self._one_by_one(batch)
                    continue
                for (_, answer), ok in zip(batch, landed, strict=True):
                    if not answer.done():
                        answer.set_result(ok)
        finally:
            self._flusher = None

    async def _one_by_one(self, batch: list[tuple[Claim, asyncio.Future[bool]]]) -> None:
        outcomes = await asyncio.gather(
            *(self._driver.ack(claim) for claim, _ in batch), return_exceptions=True
        )
        for (_, answer), outcome in zip(batch, outcomes, strict=True):
            if answer.done():
                continue
            if isinstance(outcome, BaseException):
                answer.set_exception(outcome)
            else:
                answer.set_result(outcome)


def _answer_all(batch: list[tuple[Claim, asyncio.Future[bool]]], error: BaseException) -> None:
    for _, answer in batch:
        if not answer.done():
            answer.set_exception(error)
