"""The Redis event bus: events and waits under one hash tag; send, park, find and purge are one script each."""

from __future__ import annotations

from xjobs.contract.driver import Claim, Nack
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.ids import new_id
from xjobs_redis.calls import events as calls
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import queue_of


class RedisEventBus:
    """Events per name in a ZSET by sent time, at most one wait per job; the clock is the scripts'.

    `send` and `park` touch a job's queue slot and the events slot in one script, so the bus runs
    on a standalone Redis (not on Cluster).
    """

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def now(self) -> int:
        """The injected clock's reading, or the server's `TIME` (what the scripts stamp with)."""
        injected = self._x.now()
        if injected:
            return int(injected)
        ((seconds, micros),) = await self._x.batch([lambda pipe: pipe.time()])
        return int(seconds) * 1000 + int(micros) // 1000

    async def send(self, name: str, payload: str) -> EventRecord:
        event_id = new_id()
        call = calls.event_send(
            self._k, now=self._x.now(), name=name, event_id=event_id, payload=payload
        )
        sent_at = await self._x.run(call)
        return EventRecord(id=event_id, name=name, payload=payload, sent_at_ms=int(sent_at))

    async def find(self, name: str, match: str, since_ms: int) -> EventRecord | None:
        found = await self._x.run(
            calls.event_find(self._k, name=name, match=match, since_ms=since_ms)
        )
        if found is None:
            return None
        event_id, sent_at, payload = found
        return EventRecord(
            id=str(event_id), name=name, payload=str(payload), sent_at_ms=int(sent_at)
        )

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        """The settle room's `nack` stored as `nack.lua` stores a live one, with the wait beside it."""
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        call = calls.event_park(
            self._k, now=self._x.now(), queue=queue, claim=claim, wait=wait, nack=nack
        )
        return bool(await self._x.run(call) == 1)

    async def purge_expired(self, older_than_ms: int) -> int:
        return int(await self._x.run(calls.event_purge(self._k, older_than_ms=older_than_ms)))
