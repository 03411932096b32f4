"""The Redis event bus: events under their own hash tag, each wait in its job's queue slot, both
keyed by event name and tenant; a send and a park are each two steps, one slot per script, in the
order that loses no event."""

from __future__ import annotations

from typing import Any

from xjobs.contract.driver import Claim, Nack
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.ids import new_id
from xjobs_redis.calls import events as calls
from xjobs_redis.executor import Command, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import queue_of


class RedisEventBus:
    """Events per name and tenant (a topic, `Keys.event_topic`) in a ZSET by sent time, at most
    one wait per job; the clock is the scripts'. A send reads and wakes its own topic's keys only,
    so an event of one tenant never meets another tenant's wait.

    A send stores the event and reads the queues that may hold a wait for its name (the events'
    slot), then wakes the matching waits in each (their slots). A park parks the job with its
    wait (its slot), then counts its queue in the name's HASH of queues and looks for an event
    already sent (the events' slot, in that order), waking the job on a match. An event sent around a park is never
    lost: if the send read the queues before the park's SADD, the park's look (after it) finds
    the stored event; if after, the send's wake runs after the park registered the wait and
    finds it.
    """

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def now(self) -> int:
        """The injected clock's reading, or the server's `TIME` (what the scripts stamp with)."""
        injected = self._x.now()
        if injected:
            return int(injected)
        # by name: a cluster pipeline blocks its `time` method, not the command
        ((seconds, micros),) = await self._x.batch([lambda pipe: pipe.execute_command("TIME")])
        return int(seconds) * 1000 + int(micros) // 1000

    async def send(self, name: str, payload: str, *, tenant: str | None = None) -> EventRecord:
        """Two round trips: the event stored (the events' slot), then each waiting queue's wake."""
        event_id, now = new_id(), self._x.now()
        call = calls.event_send(
            self._k, now=now, name=name, event_id=event_id, payload=payload, tenant=tenant
        )
        sent_at, *waiting = await self._x.run(call)
        wakes = [
            calls.event_wake(
                self._k, now=now, queue=str(q), name=name, payload=payload, tenant=tenant
            )
            for q in waiting
        ]
        await self._x.batch(wakes)
        return EventRecord(event_id, name, payload, int(sent_at), tenant)

    async def find(
        self, name: str, match: str, since_ms: int, *, tenant: str | None = None
    ) -> EventRecord | None:
        """One bounded script call per `FIND_BATCH` events, each after the cursor the one before
        answered, until a match or the end."""
        look = calls.event_find(self._k, name=name, match=match, since_ms=since_ms, tenant=tenant)
        return await self._look_on(name, match, since_ms, tenant, await self._x.run(look))

    async def _look_on(
        self, name: str, match: str, since_ms: int, tenant: str | None, reply: Any
    ) -> EventRecord | None:
        """Follow one step's `reply` (event_find.lua) to the found event, or to the end."""
        while reply and reply[0] == "more":
            step = calls.event_find(
                self._k, name=name, match=match, since_ms=since_ms, tenant=tenant, after=reply[1]
            )
            reply = await self._x.run(step)
        if not reply:
            return None
        _, event_id, sent_at, payload = reply
        return EventRecord(str(event_id), name, str(payload), int(sent_at), tenant)

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        """The settle room's `nack` stored as `nack.lua` stores a live one, with the wait beside it
        (its queue's slot); then, on the events' slot in one round trip, the queue is counted in
        the name's HASH of queues and an event already sent that matches is looked for, which
        wakes the job (a third round trip)."""
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        now, waiting, waited = (
            self._x.now(),
            self._k.event_queues(self._k.event_topic(wait.event, wait.tenant)),
            self._k.event_waited(),
        )
        park = calls.event_park(self._k, now=now, queue=queue, claim=claim, wait=wait, nack=nack)
        if await self._x.run(park) != 1:
            return False
        name, match, since, tenant = wait.event, wait.match, wait.since_ms, wait.tenant
        look = calls.event_find(self._k, name=name, match=match, since_ms=since, tenant=tenant)
        _, _, first = await self._x.batch(
            [
                lambda pipe: pipe.hincrby(waiting, queue, 1),
                lambda pipe: pipe.sadd(waited, waiting),
                look,
            ]
        )
        found = await self._look_on(name, match, since, tenant, first)
        if found is not None:
            wake = calls.event_wake(
                self._k, now=now, queue=queue, name=name, payload=found.payload,
                job_id=wait.job_id, tenant=tenant,
            )  # fmt: skip
            await self._x.run(wake)
        return True

    async def purge_expired(self, older_than_ms: int) -> int:
        """Two round trips, three when a name's queue holds no wait for it any more.

        First the events sent before `older_than_ms` go (the events' slot), answering each topic's
        (an event name in a tenant) queues and their park counts, beside the queue set's read;
        then each queue's waits whose deadline fell before it go (one script per queue), and each
        listed queue's waits for its topic are counted after them, pipelined; last the queues that
        hold none leave their topic's HASH, each fenced on its park count (a park meanwhile keeps
        it).
        """
        queues_key = self._k.queues()
        reply, members = await self._x.batch(
            [
                calls.event_purge(self._k, older_than_ms=older_than_ms),
                lambda pipe: pipe.smembers(queues_key),
            ]
        )
        purged, *flat = reply
        listed = [
            (self._k.event_of_queues(str(key)), str(queue), str(count))
            for key, queue, count in zip(flat[0::3], flat[1::3], flat[2::3], strict=True)
        ]
        names = sorted(str(q) for q in members)
        lapses = [calls.wait_lapse(self._k, queue=q, older_than_ms=older_than_ms) for q in names]
        counts = [self._count_waits(topic, queue) for topic, queue, _ in listed]
        replies = await self._x.batch([*lapses, *counts])
        lapsed, held = replies[: len(lapses)], replies[len(lapses) :]
        unwaited = [pair for pair, n in zip(listed, held, strict=True) if int(n) == 0]
        if unwaited:
            await self._x.run(calls.event_queues_prune(self._k, unwaited=unwaited))
        return int(purged) + sum(int(n) for n in lapsed)

    def _count_waits(self, topic: str, queue: str) -> Command:
        """A pipelined count of `queue`'s waits for `topic` (its waiting SET's SCARD)."""
        key = self._k.event_waiting(queue, topic)
        return lambda pipe: pipe.scard(key)
