"""The Redis event bus: events and waits under one hash tag; send, park, find and purge are one script each."""

from __future__ import annotations

import json
from typing import Any

from xjobs.contract.driver import Claim
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.ids import new_id
from xjobs_redis.executor import Arg, Executor
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
        k = self._k
        event_id = new_id()
        keys = [
            k.event_names(),
            k.events_sent(name),
            k.event_payloads(),
            k.event_waits(),
            k.event_waiting(name),
            k.event_deadlines(),
        ]
        sent_at = await self._x.run("event_send", keys, [self._x.now(), event_id, payload])
        return EventRecord(id=event_id, name=name, payload=payload, sent_at_ms=int(sent_at))

    async def find(self, name: str, match: str, since_ms: int) -> EventRecord | None:
        keys = [self._k.events_sent(name), self._k.event_payloads()]
        found = await self._x.run("event_find", keys, [match, since_ms])
        if found is None:
            return None
        event_id, sent_at, payload = found
        return EventRecord(
            id=str(event_id), name=name, payload=str(payload), sent_at_ms=int(sent_at)
        )

    async def park(self, claim: Claim, wait: EventWait, run_at_ms: int) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        k = self._k
        keys = [
            *k.rescheduling(queue, claim.job_id),
            k.event_waits(),
            k.event_waiting(wait.event),
            k.event_deadlines(),
            k.events_sent(wait.event),
            k.event_payloads(),
        ]
        args: list[Arg] = [
            self._x.now(),
            claim.worker_id,
            claim.claims,
            run_at_ms,
            wait.job_id,
            json.dumps(self._entry(wait), ensure_ascii=False),
            wait.match,
            wait.since_ms,
            "" if wait.deadline_ms is None else wait.deadline_ms,
        ]
        return bool(await self._x.run("event_park", keys, args) == 1)

    async def purge_expired(self, older_than_ms: int) -> int:
        k = self._k
        keys = [k.event_names(), k.event_payloads(), k.event_waits(), k.event_deadlines()]
        return int(await self._x.run("event_purge", keys, [older_than_ms]))

    def _entry(self, wait: EventWait) -> dict[str, Any]:
        """A wait as stored: its fields, and the keys its drop and its wake use (so no script builds one)."""
        k = self._k
        return {
            "job_id": wait.job_id,
            "run_id": wait.run_id,
            "queue": wait.queue,
            "step": wait.step,
            "event": wait.event,
            "match": wait.match,
            "since_ms": wait.since_ms,
            "deadline_ms": wait.deadline_ms,
            "index": k.event_waiting(wait.event),
            "job": k.job(wait.queue, wait.job_id),
            "ready": k.ready(wait.queue),
            "delayed": k.delayed(wait.queue),
        }
