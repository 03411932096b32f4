"""The Redis step store and event bus against the real server: the fence, the memo, the match, the wake."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis

from xjobs.clock import ManualClock
from xjobs.contract.backend import Backend
from xjobs.contract.driver import WAIT_FOREVER_MS, Claim, ClaimedJob, ClaimOptions, NewJob
from xjobs.contract.stores import EventBus, EventWait, StepRecord, StepStore
from xjobs.event_match import decode_object, matches
from xjobs.ids import new_id
from xjobs.run.settle import parking, retrying
from xjobs.testing import rows
from xjobs_redis.keys import Keys

pytestmark = pytest.mark.asyncio

QUEUE = "flows"
EVENT = "order.paid"
LEASE_MS = 30_000
HOUR_MS = 3_600_000
PRIORITY_SPAN = 2**42


@pytest.fixture
def backend(manual_backend: Backend) -> Backend:
    """The backend on the manual `clock` most tests here drive."""
    return manual_backend


def steps_of(backend: Backend) -> StepStore:
    assert backend.steps is not None
    return backend.steps


def bus_of(backend: Backend) -> EventBus:
    assert backend.events is not None
    return backend.events


def new_job(**overrides: Any) -> NewJob:
    return rows.new_job(**{"name": "flow_job", "queue": QUEUE, **overrides})


async def claim_one(backend: Backend, worker_id: str = "w-1") -> ClaimedJob:
    result = await backend.jobs.claim(ClaimOptions(worker_id, {QUEUE: 1}, LEASE_MS))
    (claimed,) = result.jobs
    return claimed


async def running(backend: Backend, **overrides: Any) -> ClaimedJob:
    """A fresh job of QUEUE, claimed by w-1."""
    await backend.jobs.enqueue([new_job(**overrides)])
    return await claim_one(backend)


def record(job: ClaimedJob, name: str = "charge", **overrides: Any) -> StepRecord:
    return rows.step_record(job, name, **overrides)


def wait_of(job: ClaimedJob, **overrides: Any) -> EventWait:
    return rows.event_wait(job, **{"event": EVENT, **overrides})


async def parked(backend: Backend, clock: ManualClock, **wait: Any) -> ClaimedJob:
    """A running job parked waiting for EVENT (since now unless given), due in an hour."""
    job = await running(backend)
    since = wait.pop("since_ms", clock.now_ms())
    assert await bus_of(backend).park(
        job.claim, wait_of(job, since_ms=since, **wait), parking(clock.now_ms() + HOUR_MS)
    )
    return job


async def run_at_of(backend: Backend, job_id: str) -> int:
    """When the job is due (its run_at_ms)."""
    got = await backend.jobs.get(job_id)
    assert got is not None
    return got.run_at_ms


class TestStepPut:
    async def test_a_put_under_the_claim_lands_and_list_answers_it(self, backend: Backend) -> None:
        job = await running(backend)
        step = record(job)
        assert await steps_of(backend).put(job.claim, step) is True
        assert await steps_of(backend).list(job.run_id, QUEUE) == [step]

    async def test_a_put_from_another_worker_misses_and_writes_nothing(
        self, backend: Backend
    ) -> None:
        job = await running(backend)
        intruder = replace(job.claim, worker_id="w-2")
        assert await steps_of(backend).put(intruder, record(job)) is False
        assert await steps_of(backend).list(job.run_id, QUEUE) == []

    async def test_a_put_under_an_earlier_claim_misses(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await running(backend)
        assert await backend.jobs.nack(job.claim, retrying(None, clock.now_ms()))
        again = await claim_one(backend)
        assert again.claims == job.claims + 1
        assert await steps_of(backend).put(job.claim, record(job)) is False
        assert await steps_of(backend).list(job.run_id, QUEUE) == []

    async def test_a_put_after_the_job_finished_misses(self, backend: Backend) -> None:
        job = await running(backend)
        assert await backend.jobs.ack(job.claim)
        assert await steps_of(backend).put(job.claim, record(job)) is False
        assert await steps_of(backend).list(job.run_id, QUEUE) == []

    async def test_a_put_of_a_job_no_queue_holds_misses(self, backend: Backend) -> None:
        ghost = Claim(job_id=new_id(), worker_id="w-1", claims=1)
        step = StepRecord(new_id(), "charge", "done", "1", None, 0, 1_000)
        assert await steps_of(backend).put(ghost, step) is False

    async def test_a_claim_built_without_its_queue_finds_the_job(self, backend: Backend) -> None:
        job = await running(backend)
        by_hand = Claim(job_id=job.id, worker_id=job.worker_id, claims=job.claims)
        assert await steps_of(backend).put(by_hand, record(job)) is True
        assert [s.name for s in await steps_of(backend).list(job.run_id, QUEUE)] == ["charge"]

    async def test_a_done_record_is_never_overwritten(self, backend: Backend) -> None:
        job = await running(backend)
        first = record(job, result='{"charge": "ch_1"}')
        assert await steps_of(backend).put(job.claim, first) is True
        for status in ("done", "error", "pending"):
            later = record(job, status=status, result='{"charge": "ch_2"}', created_at_ms=2_000)
            assert await steps_of(backend).put(job.claim, later) is False
        assert await steps_of(backend).list(job.run_id, QUEUE) == [first]

    @pytest.mark.parametrize("status", ["pending", "error"])
    async def test_a_pending_or_error_record_is_replaced(
        self, backend: Backend, status: str
    ) -> None:
        job = await running(backend)
        earlier = record(job, status=status, result=None, error='{"type": "Boom"}')
        done = record(job, result='{"charge": "ch_1"}', created_at_ms=2_000)
        assert await steps_of(backend).put(job.claim, earlier) is True
        assert await steps_of(backend).put(job.claim, done) is True
        assert await steps_of(backend).list(job.run_id, QUEUE) == [done]


class TestStepList:
    async def test_records_come_by_position_then_name(self, backend: Backend) -> None:
        job = await running(backend)
        for name, position in (("c", 2), ("b", 0), ("z", 1), ("a", 1)):
            assert await steps_of(backend).put(job.claim, record(job, name, position=position))
        listed = await steps_of(backend).list(job.run_id, QUEUE)
        assert [(s.position, s.name) for s in listed] == [(0, "b"), (1, "a"), (1, "z"), (2, "c")]

    async def test_a_run_without_steps_lists_nothing(self, backend: Backend) -> None:
        assert await steps_of(backend).list(new_id(), QUEUE) == []

    async def test_the_runs_steps_live_on_the_jobs_queue_slot(
        self, backend: Backend, client: Redis, prefix: str
    ) -> None:
        job = await running(backend)
        assert await steps_of(backend).put(job.claim, record(job))
        key = Keys(prefix).steps(QUEUE, job.run_id)
        assert key.startswith(f"{prefix}:{{{prefix}:{QUEUE}}}:")
        assert await client.hkeys(key) == ["charge"]


# (payload, match): every case is decided by xjobs.event_match.matches, the reference.
MATCH_CASES: list[tuple[str, str]] = [
    ('{"n": 1}', '{"n": 1.0}'),
    ('{"n": 1.0}', '{"n": 1}'),
    ('{"n": 1}', '{"n": true}'),
    ('{"n": true}', '{"n": 1}'),
    ('{"n": false}', '{"n": 0}'),
    ('{"n": 0}', '{"n": false}'),
    ('{"n": true}', '{"n": true}'),
    ('{"n": "1"}', '{"n": 1}'),
    ('{"a": {"x": 1, "y": [1, 2]}}', '{"a": {"y": [1, 2.0], "x": 1}}'),
    ('{"a": {"x": 1, "y": 2}}', '{"a": {"x": 1}}'),
    ('{"a": {"x": 1}}', '{"a": {"x": 1, "y": 2}}'),
    ('{"a": [1, 2]}', '{"a": [2, 1]}'),
    ('{"a": [1, 2]}', '{"a": [1, 2, 3]}'),
    ('{"a": []}', '{"a": {}}'),
    ('{"a": {}}', '{"a": []}'),
    ('{"a": []}', '{"a": []}'),
    ('{"a": {}}', '{"a": {}}'),
    ('{"a": [ ]}', '{"a": []}'),
    ('{"a": [[]]}', '{"a": [{}]}'),
    ('{"a": {"b": []}}', '{"a": {"b": {}}}'),
    ('{"a": [5]}', '{"a": {"1": 5}}'),
    ('{"a": "[]"}', '{"a": []}'),
    ('{"a": "x\\"[]"}', '{"a": "x\\"[]"}'),
    ('{"a": "x\\\\", "b": []}', '{"b": {}}'),
    ('{"a": null}', '{"a": null}'),
    ("{}", '{"a": null}'),
    ('{"a": null}', '{"a": 0}'),
    ('{"a": 0}', '{"a": null}'),
    ('{"a": [null, 1]}', '{"a": [null, 1]}'),
    ('{"a": [null]}', '{"a": []}'),
    ('{"b": 1}', '{"a": 1}'),
    ('{"a": 1, "b": 2}', '{"a": 1}'),
    ('{"a": 1}', "{}"),
    ("{}", "{}"),
    ('{"s": "caf\\u00e9"}', '{"s": "café"}'),
    # numbers by exact value: each spelling of one value matches, a 64-bit id only itself
    ('{"n": 9007199254740993}', '{"n": 9007199254740992}'),
    ('{"n": 9223372036854774808}', '{"n": 9223372036854774936}'),
    ('{"n": -9223372036854774808}', '{"n": -9223372036854774808}'),
    ('{"n": 1e30}', '{"n": 1000000000000000000000000000000}'),
    ('{"n": 1E+2}', '{"n": 100}'),
    ('{"n": 12.50}', '{"n": 1.25e1}'),
    ('{"n": 0.001}', '{"n": 1e-3}'),
    ('{"n": -0.0}', '{"n": 0}'),
    ('{"n": 0.1}', '{"n": 0.10000000000000001}'),
    ('{"n": [1, -2.5e-3]}', '{"n": [1.0, -0.0025]}'),
    ('{"n": {"x": 10}}', '{"n": {"x": 1}}'),
    ('{"n": "12", "m": [12]}', '{"n": 12}'),
    ('{"n1": [], "2": 3}', '{"2": 3.0, "n1": []}'),
]


class TestMatch:
    @pytest.mark.parametrize(("payload", "match"), MATCH_CASES)
    async def test_find_matches_as_the_reference_rule_does(
        self, backend: Backend, payload: str, match: str
    ) -> None:
        bus = bus_of(backend)
        sent = await bus.send(EVENT, payload)
        found = await bus.find(EVENT, match, 0)
        expected = sent if matches(decode_object(payload), decode_object(match)) else None
        assert found == expected

    @pytest.mark.parametrize(("payload", "match"), MATCH_CASES)
    async def test_send_wakes_as_the_reference_rule_matches(
        self, backend: Backend, clock: ManualClock, payload: str, match: str
    ) -> None:
        job = await parked(backend, clock, match=match)
        await bus_of(backend).send(EVENT, payload)
        woke = await run_at_of(backend, job.id) == clock.now_ms()
        assert woke is matches(decode_object(payload), decode_object(match))

    async def test_integers_beyond_2_53_compare_exactly(self, backend: Backend) -> None:
        """Lua reads numbers as doubles; the scripts compare each number's exact spelling instead,
        so 2^53 + 1 is not 2^53 (it was, before issue 40)."""
        bus = bus_of(backend)
        sent = await bus.send(EVENT, '{"n": 9007199254740993}')
        assert await bus.find(EVENT, '{"n": 9007199254740992}', 0) is None
        assert await bus.find(EVENT, '{"n": 9007199254740993}', 0) == sent


class TestFind:
    async def test_find_answers_the_earliest_match_at_or_after_since(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        bus = bus_of(backend)
        sent = []
        for n in range(3):
            sent.append(await bus.send(EVENT, json.dumps({"n": n % 2})))
            clock.advance(10)
        assert await bus.find(EVENT, '{"n": 0}', sent[0].sent_at_ms) == sent[0]
        assert await bus.find(EVENT, '{"n": 0}', sent[0].sent_at_ms + 1) == sent[2]
        assert await bus.find(EVENT, '{"n": 1}', sent[1].sent_at_ms) == sent[1]
        assert await bus.find(EVENT, '{"n": 1}', sent[1].sent_at_ms + 1) is None

    async def test_events_sent_in_one_ms_come_by_id(self, backend: Backend) -> None:
        bus = bus_of(backend)
        sent = [await bus.send(EVENT, "{}") for _ in range(5)]
        assert len({e.sent_at_ms for e in sent}) == 1
        assert await bus.find(EVENT, "{}", 0) == min(sent, key=lambda e: e.id)

    async def test_find_reads_only_its_events_name(self, backend: Backend) -> None:
        await bus_of(backend).send("order.shipped", '{"order": "o-1"}')
        assert await bus_of(backend).find(EVENT, '{"order": "o-1"}', 0) is None

    async def test_find_walks_past_a_page_of_misses(self, backend: Backend) -> None:
        bus = bus_of(backend)
        for n in range(250):
            await bus.send(EVENT, json.dumps({"n": n}))
        found = await bus.find(EVENT, '{"n": 249}', 0)
        assert found is not None
        assert json.loads(found.payload) == {"n": 249}


class TestSend:
    async def test_send_stamps_the_event_with_the_injected_clock(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        sent = await bus_of(backend).send(EVENT, '{"order": "o-1"}')
        assert (sent.name, sent.payload, sent.sent_at_ms) == (
            EVENT,
            '{"order": "o-1"}',
            clock.now_ms(),
        )

    async def test_send_and_now_read_the_servers_time(self, server_backend: Backend) -> None:
        bus = bus_of(server_backend)
        before = time.time_ns() // 1_000_000
        sent = await bus.send(EVENT, "{}")
        now = await bus.now()
        after = time.time_ns() // 1_000_000
        assert before - 1_000 <= sent.sent_at_ms <= now <= after + 1_000

    async def test_a_matching_send_makes_the_parked_job_due_now_and_claimable(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        job = await parked(backend, clock, match='{"order": "o-7"}')
        assert (await backend.jobs.claim(ClaimOptions("w-2", {QUEUE: 1}, LEASE_MS))).jobs == ()
        clock.advance(5)
        await bus_of(backend).send(EVENT, '{"order": "o-7", "amount": 12.5}')
        waiting = await backend.jobs.get(job.id)
        assert waiting is not None
        assert (waiting.state, waiting.run_at_ms, waiting.updated_at_ms) == (
            "waiting",
            clock.now_ms(),
            clock.now_ms(),
        )
        k = Keys(prefix)
        assert await client.zscore(k.ready(QUEUE), k.job(QUEUE, job.id)) == clock.now_ms()
        again = await claim_one(backend, "w-2")
        assert (again.id, again.run_id, again.attempt) == (job.id, job.run_id, 1)

    async def test_the_woken_job_is_filed_under_its_priority(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        job = await running(backend, priority=3)
        await bus_of(backend).park(job.claim, wait_of(job), parking(clock.now_ms() + HOUR_MS))
        await bus_of(backend).send(EVENT, "{}")
        k = Keys(prefix)
        score = await client.zscore(k.ready(QUEUE), k.job(QUEUE, job.id))
        assert score == 3 * PRIORITY_SPAN + clock.now_ms()
        assert await client.zscore(k.delayed(QUEUE), k.job(QUEUE, job.id)) is None

    async def test_a_send_that_does_not_match_leaves_the_wait(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await parked(backend, clock, match='{"order": "o-7"}')
        await bus_of(backend).send(EVENT, '{"order": "o-8"}')
        clock.advance(5)
        await bus_of(backend).send(EVENT, '{"order": "o-7"}')
        assert await run_at_of(backend, job.id) == clock.now_ms()

    async def test_a_wait_under_another_run_id_is_dropped_without_a_wake(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        job = await parked(backend, clock, run_id=new_id())
        await bus_of(backend).send(EVENT, "{}")
        still = await backend.jobs.get(job.id)
        assert still is not None
        assert (still.state, still.run_at_ms) == ("waiting", clock.now_ms() + HOUR_MS)
        assert await client.hlen(Keys(prefix).event_waits(QUEUE)) == 0

    async def test_a_job_that_stopped_waiting_is_not_woken(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await parked(backend, clock)
        cancelled = await backend.jobs.cancel(job.id, "no longer needed")
        await bus_of(backend).send(EVENT, "{}")
        after = await backend.jobs.get(job.id)
        assert after == cancelled.record

    async def test_a_matched_wait_is_dropped_with_its_index_and_deadline(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        await parked(backend, clock, deadline_ms=clock.now_ms() + HOUR_MS)
        await bus_of(backend).send(EVENT, "{}")
        k = Keys(prefix)
        for key in (k.event_waits(QUEUE), k.event_waiting(QUEUE, EVENT), k.event_deadlines(QUEUE)):
            assert await client.exists(key) == 0, key

    async def test_one_send_wakes_every_matching_wait(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        jobs = [
            await parked(backend, clock, match=m) for m in ('{"sku": "A"}', "{}", '{"sku": "B"}')
        ]
        first, second, other = jobs
        await bus_of(backend).send(EVENT, '{"sku": "A"}')
        due = {job.id: await run_at_of(backend, job.id) == clock.now_ms() for job in jobs}
        assert due == {first.id: True, second.id: True, other.id: False}


class TestPark:
    async def test_park_is_nacks_park_due_at_run_at(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await running(backend)
        assert await bus_of(backend).park(job.claim, wait_of(job), parking(WAIT_FOREVER_MS)) is True
        got = await backend.jobs.get(job.id)
        assert got is not None
        assert (got.state, got.attempt, got.claims, got.run_at_ms, got.lease_until_ms) == (
            "waiting",
            0,
            1,
            WAIT_FOREVER_MS,
            None,
        )

    async def test_an_event_sent_since_the_wait_began_makes_the_park_due_now(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        since = clock.now_ms()
        job = await running(backend)
        await bus_of(backend).send(EVENT, '{"order": "o-7"}')
        clock.advance(20)
        wait = wait_of(job, match='{"order": "o-7"}', since_ms=since)
        assert await bus_of(backend).park(job.claim, wait, parking(WAIT_FOREVER_MS)) is True
        got = await backend.jobs.get(job.id)
        assert got is not None
        assert (got.state, got.run_at_ms) == ("waiting", clock.now_ms())
        assert (await claim_one(backend, "w-2")).id == job.id

    async def test_an_event_sent_before_the_wait_began_leaves_the_park_at_run_at(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await running(backend)
        await bus_of(backend).send(EVENT, "{}")
        clock.advance(1)
        wait = wait_of(job, since_ms=clock.now_ms())
        assert await bus_of(backend).park(job.claim, wait, parking(clock.now_ms() + HOUR_MS))
        assert await run_at_of(backend, job.id) == clock.now_ms() + HOUR_MS

    async def test_a_park_that_misses_its_fence_writes_nothing(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        job = await running(backend)
        before = await backend.jobs.get(job.id)
        keys_before = {key async for key in client.scan_iter(match=f"{prefix}:*")}
        intruder = replace(job.claim, worker_id="w-2")
        await bus_of(backend).send(EVENT, "{}")
        assert await bus_of(backend).park(intruder, wait_of(job), parking(WAIT_FOREVER_MS)) is False
        assert await backend.jobs.get(job.id) == before
        k = Keys(prefix)
        keys_after = {key async for key in client.scan_iter(match=f"{prefix}:*")}
        assert keys_after - keys_before == {
            k.event_names(),
            k.events_sent(EVENT),
            k.event_payloads(),
        }

    async def test_a_park_after_the_job_finished_misses(self, backend: Backend) -> None:
        job = await running(backend)
        assert await backend.jobs.ack(job.claim)
        assert (
            await bus_of(backend).park(job.claim, wait_of(job), parking(WAIT_FOREVER_MS)) is False
        )

    async def test_a_claim_built_without_its_queue_parks(self, backend: Backend) -> None:
        job = await running(backend)
        by_hand = Claim(job_id=job.id, worker_id=job.worker_id, claims=job.claims)
        assert await bus_of(backend).park(by_hand, wait_of(job), parking(WAIT_FOREVER_MS)) is True

    async def test_a_new_park_replaces_the_jobs_earlier_wait(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        job = await parked(backend, clock, event="order.shipped")
        clock.advance(HOUR_MS)
        again = await claim_one(backend)
        wait = wait_of(job, event=EVENT, since_ms=clock.now_ms())
        assert await bus_of(backend).park(again.claim, wait, parking(clock.now_ms() + HOUR_MS))
        assert await client.exists(Keys(prefix).event_waiting(QUEUE, "order.shipped")) == 0
        await bus_of(backend).send("order.shipped", "{}")
        assert await run_at_of(backend, job.id) == clock.now_ms() + HOUR_MS
        await bus_of(backend).send(EVENT, "{}")
        assert await run_at_of(backend, job.id) == clock.now_ms()


class TestPurge:
    async def test_purge_counts_old_events_and_lapsed_waits(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        bus = bus_of(backend)
        start = clock.now_ms()
        await bus.send(EVENT, "{}")
        await bus.send("order.shipped", "{}")
        await parked(backend, clock, event="other.event", deadline_ms=start + 10)
        await parked(backend, clock, event="other.event", deadline_ms=start + 20)
        await parked(backend, clock, event="other.event")
        clock.advance(20)
        kept = await bus.send(EVENT, "{}")
        assert await bus.purge_expired(start + 20) == 3
        assert await bus.find(EVENT, "{}", 0) == kept
        assert await bus.find("order.shipped", "{}", 0) is None

    async def test_an_event_or_deadline_at_the_bound_stays(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        bus = bus_of(backend)
        at = clock.now_ms()
        sent = await bus.send(EVENT, "{}")
        await parked(backend, clock, event="other.event", deadline_ms=at)
        assert await bus.purge_expired(at) == 0
        assert await bus.find(EVENT, "{}", 0) == sent

    async def test_a_purged_wait_no_longer_wakes_its_job(
        self, backend: Backend, clock: ManualClock
    ) -> None:
        job = await parked(backend, clock, deadline_ms=clock.now_ms() + 10)
        assert await bus_of(backend).purge_expired(clock.now_ms() + 11) == 1
        await bus_of(backend).send(EVENT, "{}")
        assert await run_at_of(backend, job.id) == clock.now_ms() + HOUR_MS

    async def test_purging_everything_leaves_no_event_key(
        self, backend: Backend, clock: ManualClock, client: Redis, prefix: str
    ) -> None:
        await bus_of(backend).send(EVENT, "{}")
        await parked(backend, clock, event="other.event", deadline_ms=clock.now_ms())
        assert await bus_of(backend).purge_expired(clock.now_ms() + 1) == 2
        events_tag = f"{prefix}:{{{prefix}:events}}:*"
        assert [key async for key in client.scan_iter(match=events_tag)] == []
