"""The Redis event find is bounded (issue 40, item 10): each event_find.lua call reads FIND_BATCH
stored events at most and answers a cursor, and the bus follows it, so one busy event name never
holds the server for a long script."""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.stores import EventBus
from xjobs_redis.calls import events as calls
from xjobs_redis.calls.events import FIND_BATCH
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys

pytestmark = pytest.mark.asyncio

EVENT = "order.paid"
BUSY = 3 * FIND_BATCH + 7  # events of one name that do not match, before the one that does


@pytest.fixture
def backend(manual_backend: Backend) -> Backend:
    return manual_backend


def bus_of(backend: Backend) -> EventBus:
    assert backend.events is not None
    return backend.events


async def store_busy_name(client: Redis, prefix: str, clock: ManualClock) -> list[str]:
    """BUSY non-matching events of EVENT, one a ms, then the match: answers the ids in order."""
    x = Executor(client, clock)
    await x.load()
    k, start = Keys(prefix), clock.now_ms()
    ids = [f"e-{n:05d}" for n in range(BUSY + 1)]
    sends = [
        calls.event_send(
            k,
            now=str(start + n),
            name=EVENT,
            event_id=event_id,
            payload=json.dumps({"order": "wanted" if n == BUSY else f"other-{n}"}),
        )
        for n, event_id in enumerate(ids)
    ]
    await x.batch(sends)
    clock.advance(BUSY + 1)
    return ids


async def script_stats(client: Redis) -> dict[str, int]:
    """How many times the server ran EVALSHA and HGET (a find's script reads each entry's payload
    with one HGET), server-wide."""
    stats = await client.info("commandstats")
    return {
        name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "hget")
    }


class TestBoundedFind:
    async def test_one_script_call_reads_at_most_a_batch_and_answers_its_cursor(
        self, backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        ids = await store_busy_name(client, prefix, clock)
        x = Executor(client, clock)
        await x.load()
        look = calls.event_find(Keys(prefix), name=EVENT, match='{"order": "wanted"}', since_ms=0)
        before = await script_stats(client)
        reply = await x.run(look)
        after = await script_stats(client)
        assert reply == ["more", ids[FIND_BATCH - 1]]
        assert after["hget"] - before["hget"] == FIND_BATCH

    async def test_a_step_after_the_cursor_reads_the_next_batch(
        self, backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        ids = await store_busy_name(client, prefix, clock)
        x = Executor(client, clock)
        await x.load()
        k, match = Keys(prefix), '{"order": "wanted"}'
        second = await x.run(
            calls.event_find(k, name=EVENT, match=match, since_ms=0, after=ids[FIND_BATCH - 1])
        )
        last = await x.run(calls.event_find(k, name=EVENT, match=match, since_ms=0, after=ids[-2]))
        past = await x.run(calls.event_find(k, name=EVENT, match=match, since_ms=0, after=ids[-1]))
        assert second == ["more", ids[2 * FIND_BATCH - 1]]
        assert last[:2] == ["found", ids[-1]]
        assert past == []

    async def test_the_bus_finds_the_match_behind_a_busy_name_one_batch_a_call(
        self, backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        ids = await store_busy_name(client, prefix, clock)
        before = await script_stats(client)
        found = await bus_of(backend).find(EVENT, '{"order": "wanted"}', 0)
        after = await script_stats(client)
        assert found is not None
        assert found.id == ids[-1]
        assert after["evalsha"] - before["evalsha"] == -(-(BUSY + 1) // FIND_BATCH)
        assert after["hget"] - before["hget"] == BUSY + 1

    async def test_a_cursor_whose_event_was_purged_starts_again_at_since(
        self, backend: Backend, client: Redis, prefix: str, clock: ManualClock
    ) -> None:
        """The purge takes the oldest events first, so every event before a purged cursor went
        with it: the step reads on from since_ms and misses nothing still stored."""
        ids = await store_busy_name(client, prefix, clock)
        cut = clock.now_ms() - (BUSY + 1) + FIND_BATCH  # the first FIND_BATCH events go
        assert await bus_of(backend).purge_expired(cut) == FIND_BATCH
        x = Executor(client, clock)
        await x.load()
        look = calls.event_find(
            Keys(prefix), name=EVENT, match="{}", since_ms=0, after=ids[FIND_BATCH - 1]
        )
        assert (await x.run(look))[:2] == ["found", ids[FIND_BATCH]]
