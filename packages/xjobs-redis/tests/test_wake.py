"""The Redis wake: a pub/sub subscription proven by a probe, re-proven after every re-dial, and a
PUBLISH only for an enqueue that got a due row.

A wake's absence is shown without sleeping: after the enqueue under test, a marker is published
on the same channel; one subscriber receives messages in the server's order, so anything the
enqueue published arrives before the marker.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from xjobs.contract.backend import Backend
from xjobs.testing.rows import new_job
from xjobs_redis.backend import open_backend
from xjobs_redis.keys import Keys

WAIT_S = 10.0
HOUR_MS = 3_600_000


class Heard:
    """Every wake a subscriber got, in order (`None`: re-scan every queue)."""

    def __init__(self) -> None:
        self.wakes: list[str | None] = []

    def __call__(self, queue: str | None) -> None:
        self.wakes.append(queue)

    def before(self, marker: str) -> list[str | None]:
        return self.wakes[: self.wakes.index(marker)]


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@pytest_asyncio.fixture
async def backend(server_backend: Backend) -> Backend:
    """The subscribing backend (the conftest's, on the wall clock)."""
    return server_backend


@pytest_asyncio.fixture
async def publisher(url: str, prefix: str, client: Redis) -> AsyncIterator[Backend]:
    """A second backend on the same prefix: another process's enqueues."""
    opened = await open_backend(url, prefix=prefix)
    try:
        yield opened
    finally:
        await opened.close()


async def subscribers(client: Redis, prefix: str) -> int:
    channel = Keys(prefix).wake_channel()
    ((_, count),) = await client.pubsub_numsub(channel)
    return int(count)


async def heard_live(backend: Backend) -> Heard:
    heard = Heard()
    assert backend.wake is not None
    backend.wake.subscribe(heard)
    await until(lambda: backend.wake is not None and backend.wake.live, "the wake to be proven")
    return heard


@pytest.mark.asyncio
async def test_the_wake_is_not_live_and_not_subscribed_before_a_listener(
    backend: Backend, client: Redis, prefix: str
) -> None:
    assert backend.wake is not None
    assert (backend.wake.live, await subscribers(client, prefix)) == (False, 0)


@pytest.mark.asyncio
async def test_the_wake_is_proven_live_after_a_listener_subscribes(
    backend: Backend, client: Redis, prefix: str
) -> None:
    heard = await heard_live(backend)
    assert await subscribers(client, prefix) == 1
    assert heard.wakes[:1] == [None]  # the first subscription re-scans every queue


@pytest.mark.asyncio
async def test_an_enqueue_in_another_backend_wakes_the_subscriber_with_the_queue_name(
    backend: Backend, publisher: Backend
) -> None:
    heard = await heard_live(backend)
    await publisher.jobs.enqueue([new_job(queue="mail")])
    await until(lambda: "mail" in heard.wakes, "the wake of queue mail")


@pytest.mark.asyncio
async def test_a_delayed_job_publishes_no_wake(
    backend: Backend, publisher: Backend, client: Redis, prefix: str
) -> None:
    heard = await heard_live(backend)
    later = int(time.time() * 1000) + HOUR_MS
    await publisher.jobs.enqueue([new_job(queue="mail", run_at_ms=later)])
    marker = f"marker-{secrets.token_hex(4)}"
    await client.publish(Keys(prefix).wake_channel(), marker)
    await until(lambda: marker in heard.wakes, "the marker")
    assert [w for w in heard.before(marker) if w is not None] == []


@pytest.mark.asyncio
async def test_a_deduped_enqueue_publishes_no_wake(
    backend: Backend, publisher: Backend, client: Redis, prefix: str
) -> None:
    job = new_job(queue="mail", idempotency_key="once")
    (first,) = await publisher.jobs.enqueue([job])
    heard = await heard_live(backend)
    (again,) = await publisher.jobs.enqueue([new_job(queue="mail", idempotency_key="once")])
    assert (again.deduped, again.job_id) == (True, first.job_id)
    marker = f"marker-{secrets.token_hex(4)}"
    await client.publish(Keys(prefix).wake_channel(), marker)
    await until(lambda: marker in heard.wakes, "the marker")
    assert [w for w in heard.before(marker) if w is not None] == []


@pytest.mark.asyncio
async def test_one_bulk_enqueue_publishes_each_due_queue_once(
    backend: Backend, publisher: Backend, client: Redis, prefix: str
) -> None:
    heard = await heard_live(backend)
    rows = [new_job(queue="a") for _ in range(3)] + [new_job(queue="b") for _ in range(2)]
    await publisher.jobs.enqueue(rows)
    marker = f"marker-{secrets.token_hex(4)}"
    await client.publish(Keys(prefix).wake_channel(), marker)
    await until(lambda: marker in heard.wakes, "the marker")
    assert sorted(w for w in heard.before(marker) if w is not None) == ["a", "b"]


@pytest.mark.asyncio
async def test_a_killed_subscription_is_redialled_reproven_and_rescans(
    backend: Backend, publisher: Backend, client: Redis
) -> None:
    heard = await heard_live(backend)
    assert backend.wake is not None
    rescans = heard.wakes.count(None)
    await client.client_kill_filter(_type="pubsub")
    await until(lambda: heard.wakes.count(None) > rescans, "the re-scan after the re-dial")
    await until(lambda: backend.wake is not None and backend.wake.live, "the wake re-proven")
    await publisher.jobs.enqueue([new_job(queue="after")])
    await until(lambda: "after" in heard.wakes, "a wake through the new subscription")


@pytest.mark.asyncio
async def test_closing_the_backend_ends_the_subscription(
    url: str, prefix: str, client: Redis
) -> None:
    opened = await open_backend(url, prefix=prefix)
    await heard_live(opened)
    await opened.close()
    assert await subscribers(client, prefix) == 0
