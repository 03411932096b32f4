"""The Redis slot store: fleet concurrency slots, a ZSET per key of `<job_id>:<claims>` by expiry."""

from __future__ import annotations

from xjobs.contract.stores import SlotHolder
from xjobs_redis.calls import fleet
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys


def holder_of(text: str) -> SlotHolder:
    """The holder a ZSET member names (a job id may hold `:`; the claims never do)."""
    job_id, _, claims = text.rpartition(":")
    return SlotHolder(job_id=job_id, claims=int(claims))


class RedisSlotStore:
    """Each operation is one script on the key's own slot; expired slots are removed as it runs."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._keys = keys

    async def acquire(self, key: str, holder: SlotHolder, limit: int, ttl_ms: int) -> bool:
        call = fleet.slot_acquire(
            self._keys, now=self._x.now(), key=key, holder=holder, limit=limit, ttl_ms=ttl_ms
        )
        return bool(await self._x.run(call) == 1)

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        now = self._x.now()
        call = fleet.slot_renew(self._keys, now=now, key=key, holder=holder, ttl_ms=ttl_ms)
        return bool(await self._x.run(call) == 1)

    async def release(self, key: str, holder: SlotHolder) -> bool:
        call = fleet.slot_release(self._keys, now=self._x.now(), key=key, holder=holder)
        return bool(await self._x.run(call) == 1)

    async def holders(self, key: str) -> list[SlotHolder]:
        members = await self._x.run(fleet.slot_holders(self._keys, now=self._x.now(), key=key))
        return sorted((holder_of(str(m)) for m in members), key=lambda h: (h.job_id, h.claims))
