"""The Redis lease store: fleet concurrency slots, a ZSET per key of `<job_id>:<claims>` by expiry."""

from __future__ import annotations

from xjobs.contract.stores import SlotHolder
from xjobs_redis.executor import Arg, Executor
from xjobs_redis.keys import Keys


def member(holder: SlotHolder) -> str:
    """A holder as its ZSET member: owned by (job id, claim), never a bare counter."""
    return f"{holder.job_id}:{holder.claims}"


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
        args: list[Arg] = [self._x.now(), member(holder), limit, ttl_ms]
        return bool(await self._x.run("slot_acquire", [self._keys.lease(key)], args) == 1)

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        args: list[Arg] = [self._x.now(), member(holder), ttl_ms]
        return bool(await self._x.run("slot_renew", [self._keys.lease(key)], args) == 1)

    async def release(self, key: str, holder: SlotHolder) -> bool:
        args: list[Arg] = [self._x.now(), member(holder)]
        return bool(await self._x.run("slot_release", [self._keys.lease(key)], args) == 1)

    async def holders(self, key: str) -> list[SlotHolder]:
        members = await self._x.run("slot_holders", [self._keys.lease(key)], [self._x.now()])
        return sorted((holder_of(str(m)) for m in members), key=lambda h: (h.job_id, h.claims))
