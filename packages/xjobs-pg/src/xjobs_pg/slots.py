"""The Postgres slot store: fleet concurrency slots, a row per (key, job id, claim), reclaimed when expired."""

from __future__ import annotations

from xjobs.contract.stores import SlotHolder
from xjobs_pg.executor import Executor
from xjobs_pg.params import One
from xjobs_pg.store_params import (
    SlotAcquireParams,
    SlotHoldersParams,
    SlotReleaseParams,
    SlotRenewParams,
)


class PostgresSlotStore:
    """Slots in `<schema>.slots`; acquirers of one key serialise on a transaction advisory lock."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def acquire(self, key: str, holder: SlotHolder, limit: int, ttl_ms: int) -> bool:
        if limit <= 0:
            return False
        acquire = SlotAcquireParams(self._x.now(), key, holder, limit, ttl_ms)
        _, taken = await self._x.in_transaction(
            [("slot_lock", One(key)), ("slot_acquire", acquire)]
        )
        return bool(taken)

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        params = SlotRenewParams(self._x.now(), key, holder, ttl_ms)
        return await self._x.execute("slot_renew", params) == 1

    async def release(self, key: str, holder: SlotHolder) -> bool:
        params = SlotReleaseParams(self._x.now(), key, holder)
        return await self._x.execute("slot_release", params) == 1

    async def holders(self, key: str) -> list[SlotHolder]:
        rows = await self._x.fetch("slot_holders", SlotHoldersParams(self._x.now(), key))
        return [SlotHolder(job_id=row["job_id"], claims=row["claims"]) for row in rows]
