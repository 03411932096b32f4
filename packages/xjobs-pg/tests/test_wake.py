"""The Postgres wake: proven by a probe, re-proven after every re-dial, and sent only when a statement decides.

A wake's absence is shown without sleeping: after the statement under test commits, a marker is
notified on the same channel; notifications reach a listener in commit order, so anything the
statement sent arrives before the marker.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import asyncpg
import pytest

from xjobs.contract.backend import Backend, WakeSource
from xjobs.contract.driver import NewJob
from xjobs_pg import wake_slots
from xjobs_pg.driver import PostgresJobDriver
from xjobs_pg.schema import quote_schema, wake_channel
from xjobs_pg.sql import Statements
from xjobs_pg.testing import (
    opened,
    server_dsn,
    session,
)
from xjobs_pg.wake_slots import WAKE_SLOT_MS, WakeSlots

WAIT_S = 10.0
HOUR_MS = 3_600_000
LISTENING = """
select pid from pg_stat_activity
where query ilike 'listen%' and position($1 in query) > 0 and pid <> pg_backend_pid()
"""


dsn = server_dsn


class Heard:
    """Every payload a listener got, in order (`None`: re-scan every queue)."""

    def __init__(self) -> None:
        self.wakes: list[str | None] = []

    def __call__(self, queue: str | None) -> None:
        self.wakes.append(queue)

    def on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        self.wakes.append(str(payload))

    def before(self, marker: str) -> list[str | None]:
        return self.wakes[: self.wakes.index(marker)]


@asynccontextmanager
async def raw_listener(channel: str) -> AsyncIterator[Heard]:
    """A plain `LISTEN` session of the test's own, beside the backend's."""
    heard = Heard()
    async with session() as conn:
        await conn.add_listener(channel, heard.on_notify)
        yield heard


async def eventually(check: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Wait until `check()` holds, polling; fail naming `what` after `timeout_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.002)


async def mark(channel: str, heard: Heard) -> str:
    """Notify a marker from another session and wait for it: everything sent before it arrived."""
    marker = f"marker:{secrets.token_hex(4)}"
    async with session() as conn:
        await conn.execute("select pg_notify($1, $2)", channel, marker)
    await eventually(lambda: marker in heard.wakes, f"the marker {marker} is heard")
    return marker


def new_job(queue: str, *, run_at_ms: int | None = None, key: str | None = None) -> NewJob:
    return NewJob(
        id=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        name="wake.ping",
        queue=queue,
        tenant_id=None,
        idempotency_key=key or secrets.token_hex(8),
        payload="{}",
        priority=0,
        run_at_ms=run_at_ms,
        max_attempts=3,
        dead_letter=True,
        enqueued_by=None,
        traceparent=None,
    )


def wake_of(backend: Backend) -> WakeSource:
    assert backend.wake is not None
    return backend.wake


def driver_of(backend: Backend) -> PostgresJobDriver:
    assert isinstance(backend.jobs, PostgresJobDriver)
    return backend.jobs


async def subscribed(backend: Backend) -> Heard:
    """A subscriber on `backend`'s wake, returned once a probe proved the wake."""
    heard = Heard()
    wake = wake_of(backend)
    wake.subscribe(heard)
    await eventually(lambda: wake.live, "the wake is proven live")
    return heard


def now_ms() -> int:
    return int(time.time() * 1000)


# -- (a) the wake is live only after a probe crossed it --------------------------------------


@pytest.mark.asyncio
async def test_the_wake_is_not_live_before_a_listener_subscribes(schema: str) -> None:
    async with opened(schema) as backend, session() as conn:
        await asyncio.sleep(0.2)  # room for a listener that should not exist to connect
        assert wake_of(backend).live is False
        assert await conn.fetch(LISTENING, wake_channel(schema)) == []


@pytest.mark.asyncio
async def test_the_wake_is_proven_live_after_a_listener_subscribes(schema: str) -> None:
    async with opened(schema) as backend:
        wake = wake_of(backend)
        heard = Heard()
        wake.subscribe(heard)
        await eventually(lambda: wake.live, "the wake is proven live")
        await eventually(lambda: heard.wakes != [], "the subscriber is told to re-scan")
        assert heard.wakes[0] is None  # the probe itself is not a queue's wake


@pytest.mark.asyncio
async def test_one_listening_session_serves_every_subscriber(schema: str) -> None:
    async with opened(schema) as backend, session() as conn:
        await subscribed(backend)
        await subscribed(backend)
        assert len(await conn.fetch(LISTENING, wake_channel(schema))) == 1


# -- (b) an enqueue of a due job wakes the queue ---------------------------------------------


@pytest.mark.asyncio
async def test_an_enqueue_in_another_backend_wakes_the_subscriber_with_the_queue_name(
    schema: str,
) -> None:
    async with opened(schema) as listening, opened(schema) as enqueuing:
        heard = await subscribed(listening)
        await enqueuing.jobs.enqueue([new_job("emails")])
        await eventually(lambda: "emails" in heard.wakes, "the emails queue is woken")


# -- (c) a delayed job does not notify -------------------------------------------------------


@pytest.mark.asyncio
async def test_a_delayed_job_does_not_notify(schema: str) -> None:
    async with opened(schema) as listening, opened(schema) as enqueuing:
        heard = await subscribed(listening)
        await enqueuing.jobs.enqueue([new_job("later", run_at_ms=now_ms() + HOUR_MS)])
        marker = await mark(wake_channel(schema), heard)
        assert "later" not in heard.before(marker)


# -- (d) at most one notify per queue per WAKE_SLOT_MS ---------------------------------------


@pytest.mark.asyncio
async def test_a_burst_of_enqueues_notifies_at_most_once_per_queue_per_slot(schema: str) -> None:
    async with opened(schema) as backend, raw_listener(wake_channel(schema)) as heard:
        started = time.monotonic_ns() // 1_000_000 // WAKE_SLOT_MS
        for _ in range(50):
            await backend.jobs.enqueue([new_job("burst")])
        ended = time.monotonic_ns() // 1_000_000 // WAKE_SLOT_MS
        marker = await mark(wake_channel(schema), heard)
    notifies = heard.before(marker).count("burst")
    assert 1 <= notifies < 50
    assert notifies <= ended - started + 1  # never two in one slot


class FakeMonotonic:
    """A `time` stand-in for `wake_slots`: the monotonic clock moves only when told."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def monotonic_ns(self) -> int:
        return self.ms * 1_000_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    fake = FakeMonotonic()
    monkeypatch.setattr(wake_slots, "time", fake)
    return fake


def test_wake_slots_grant_a_queue_once_per_slot(clock: FakeMonotonic) -> None:
    slots = WakeSlots("c")
    assert slots.take(["q"]) == ["q"]
    clock.ms += WAKE_SLOT_MS - 1
    assert slots.take(["q"]) == []


def test_wake_slots_grant_a_queue_again_in_the_next_slot(clock: FakeMonotonic) -> None:
    slots = WakeSlots("c")
    clock.ms = 10 * WAKE_SLOT_MS + WAKE_SLOT_MS - 1  # the last millisecond of a slot
    assert slots.take(["q"]) == ["q"]
    clock.ms += 1
    assert slots.take(["q"]) == ["q"]


def test_wake_slots_grant_different_queues_independently(clock: FakeMonotonic) -> None:
    slots = WakeSlots("c")
    assert slots.take(["a"]) == ["a"]
    assert slots.take(["a", "b"]) == ["b"]
    assert slots.take(["b", "a", "c"]) == ["c"]


def test_wake_slots_grant_a_queue_named_twice_in_one_take_once(clock: FakeMonotonic) -> None:
    assert WakeSlots("c").take(["q", "q"]) == ["q"]


def test_wake_slots_measure_the_slot_they_are_given(clock: FakeMonotonic) -> None:
    slots = WakeSlots("c", slot_ms=1000)
    clock.ms = 5000
    assert slots.take(["q"]) == ["q"]
    clock.ms = 5999
    assert slots.take(["q"]) == []
    clock.ms = 6000
    assert slots.take(["q"]) == ["q"]


def test_each_backends_slots_notify_on_its_schemas_channel() -> None:
    assert WakeSlots(wake_channel("xjobs_t_x")).channel == "xjobs_t_x_wake"


# -- (e) a lost listening session is unproven, re-dialled, re-proven, and re-scans ----------


@pytest.mark.asyncio
async def test_a_terminated_listening_session_is_redialled_reproven_and_rescans(
    schema: str,
) -> None:
    channel = wake_channel(schema)
    async with opened(schema) as backend, session() as admin:
        wake = wake_of(backend)
        heard = await subscribed(backend)
        [old_pid] = [row["pid"] for row in await admin.fetch(LISTENING, channel)]
        was_live = wake.live
        heard.wakes.clear()

        assert await admin.fetchval("select pg_terminate_backend($1)", old_pid) is True
        await eventually(lambda: not wake.live, "the wake is unproven after the session died")
        await eventually(lambda: wake.live, "the wake is proven again after the re-dial")
        await eventually(lambda: None in heard.wakes, "the subscriber is told to re-scan")

        await backend.jobs.enqueue([new_job("after-redial")])
        await eventually(lambda: "after-redial" in heard.wakes, "the re-dialled wake delivers")
        pids = await settled_listeners(admin, channel, gone=old_pid)
    assert was_live is True
    assert len(pids) == 1  # still one listening session, a new one


async def settled_listeners(admin: asyncpg.Connection, channel: str, *, gone: int) -> list[int]:
    """The sessions listening on `channel` once the terminated `gone` has left pg_stat_activity."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        pids = [row["pid"] for row in await admin.fetch(LISTENING, channel)]
        if gone not in pids or loop.time() > deadline:
            return pids
        await asyncio.sleep(0.01)


# -- (f) the statement decides whether it notifies -------------------------------------------


@pytest.mark.asyncio
async def test_an_enqueue_into_a_queue_whose_slot_is_taken_sends_no_notify(schema: str) -> None:
    channel = wake_channel(schema)
    async with opened(schema) as backend, raw_listener(channel) as heard:
        slots = WakeSlots(channel, slot_ms=10**12)  # one slot for the whole test
        driver_of(backend)._wake = slots
        assert slots.take(["held"]) == ["held"]  # this slot's notify for `held` is spent
        await backend.jobs.enqueue([new_job("held")])
        await backend.jobs.enqueue([new_job("open")])  # a granted queue: the control
        marker = await mark(channel, heard)
    assert heard.before(marker) == ["open"]


@pytest.mark.asyncio
async def test_a_deduped_enqueue_sends_no_notify_even_when_granted_a_slot(schema: str) -> None:
    channel = wake_channel(schema)
    async with opened(schema) as backend, raw_listener(channel) as heard:
        driver = driver_of(backend)
        await backend.jobs.enqueue([new_job("dup", key="same")])
        driver._wake = WakeSlots(channel)  # a fresh memory: `dup` is granted again
        [result] = await backend.jobs.enqueue([new_job("dup", key="same")])
        marker = await mark(channel, heard)
    assert result.deduped is True
    assert heard.before(marker) == ["dup"]


ENQUEUE_ARGS = 13  # the per-row arrays ($1..$13); then now ($14), queues to wake ($15), channel


@pytest.mark.asyncio
async def test_the_enqueue_statement_notifies_only_asked_queues_that_got_a_due_row(
    schema: str,
) -> None:
    channel = wake_channel(schema)
    now = now_ms()
    jobs = [
        new_job("asked", run_at_ms=now - 1),
        new_job("asked-later", run_at_ms=now + HOUR_MS),
        new_job("unasked", run_at_ms=now - 1),
        new_job("asked"),  # a second due row in one queue: still one notify
    ]
    columns = [
        [getattr(job, field) for job in jobs]
        for field in (
            "id",
            "run_id",
            "name",
            "queue",
            "tenant_id",
            "idempotency_key",
            "payload",
            "priority",
            "run_at_ms",
            "max_attempts",
            "dead_letter",
            "enqueued_by",
            "traceparent",
        )
    ]
    assert len(columns) == ENQUEUE_ARGS
    async with opened(schema), raw_listener(channel) as heard, session() as conn:
        enqueue = Statements(quote_schema(schema))["enqueue"]
        rows = await conn.fetch(enqueue, *columns, now, ["asked", "asked-later"], channel)
        marker = await mark(channel, heard)
    assert [row["inserted"] for row in rows] == [True] * len(jobs)
    assert heard.before(marker) == ["asked"]
