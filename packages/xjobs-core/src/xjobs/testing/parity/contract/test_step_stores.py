"""Parity: the step store and the event bus at the store level, and the step writes' fence (stores.py, "StepStore", "EventBus")."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from xjobs import JobContext, job
from xjobs.contract.driver import WAIT_FOREVER_MS, Claim, ClaimedJob
from xjobs.contract.stores import EventBus, EventRecord, EventWait, StepRecord, StepStore
from xjobs.errors import AbortedError, LeaseLostError, XJobsError
from xjobs.ids import new_id
from xjobs.run.settle import parking, retrying
from xjobs.testing import rows
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    LEASE,
    NOW_RETRY,
    QUEUE,
    WAIT_S,
    Item,
    key_of,
    org_of,
    reclaim_lapsed,
    within,
)

pytestmark = pytest.mark.xjobs_parity

EVENT = "order.paid"
OTHER_EVENT = "order.shipped"
LATER_EVENT = "invoice.sent"  # what the purge scenarios' runs wait for
HOUR_MS = 3_600_000
# A lease whose heartbeat (a third of it, on the loop's real clock) never fires during a scenario:
# the only thing that moves the claim on is what the scenario does through the driver.
HELD_LEASE = timedelta(seconds=30)
HELD_LEASE_MS = 30_000


def _steps(parity: ParityEnv) -> StepStore:
    steps = parity.backend.steps
    assert steps is not None, 'mark the scenario @pytest.mark.requires("steps")'
    return steps


def _bus(parity: ParityEnv) -> EventBus:
    events = parity.backend.events
    assert events is not None, 'mark the scenario @pytest.mark.requires("events")'
    return events


def _step(job: ClaimedJob, name: str = "charge", **overrides: Any) -> StepRecord:
    return rows.step_record(job, name, **overrides)


def _wait(job: ClaimedJob, **overrides: Any) -> EventWait:
    return rows.event_wait(job, **{"event": EVENT, **overrides})


def _seen(event: EventRecord | None) -> tuple[str, str, object, int] | None:
    """An event as found: its id, name, decoded payload and send time (a store may respell the JSON)."""
    if event is None:
        return None
    return (event.id, event.name, json.loads(event.payload), event.sent_at_ms)


async def _running(parity: ParityEnv) -> ClaimedJob:
    """A fresh job of queue `parity`, claimed by worker-a."""
    new = await parity.enqueue()
    claimed = await parity.claim_one()
    assert claimed.id == new.id
    return claimed


async def _reclaimed(parity: ParityEnv) -> tuple[ClaimedJob, ClaimedJob]:
    """A job claimed, retried at once, and claimed again by the same worker: (first, second)."""
    first = await _running(parity)
    retry = retrying(None, parity.clock.now_ms())
    assert await parity.backend.jobs.nack(first.claim, retry)
    second = await parity.claim_one()
    assert (second.id, second.worker_id, second.claims) == (
        first.id,
        first.worker_id,
        first.claims + 1,
    )
    return first, second


async def _parked(
    parity: ParityEnv, run_at_ms: int | None = None, **wait: Any
) -> tuple[ClaimedJob, int]:
    """A running job parked waiting (since now unless given) for EVENT; answers it and its run_at."""
    claimed = await _running(parity)
    now = parity.clock.now_ms()
    at = now + HOUR_MS if run_at_ms is None else run_at_ms
    since = wait.pop("since_ms", now)
    landed = await _bus(parity).park(
        claimed.claim, _wait(claimed, since_ms=since, **wait), parking(at)
    )
    assert landed, "the park under the live claim did not land"
    return claimed, at


async def _due(parity: ParityEnv, job_id: str) -> tuple[str, int]:
    """The job's state and when it is due."""
    record = await parity.record(job_id)
    return record.state, record.run_at_ms


@pytest.mark.requires("steps")
class TestStepPut:
    async def test_a_put_under_the_live_claim_lands_and_is_listed(self, parity: ParityEnv) -> None:
        """Rule: a step write fenced on the running job's claim lands; `list` answers the record."""
        claimed = await _running(parity)
        step = _step(claimed)
        landed = await _steps(parity).put(claimed.claim, step)
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (True, [step])

    async def test_list_answers_the_records_by_position(self, parity: ParityEnv) -> None:
        """Rule: `list` answers every recorded step of the run, by position (not by write order)."""
        claimed = await _running(parity)
        for name, position in (("ship", 2), ("reserve", 0), ("notify", 3), ("charge", 1)):
            step = _step(claimed, name, position=position)
            assert await _steps(parity).put(claimed.claim, step)
        listed = await _steps(parity).list(claimed.run_id, claimed.queue)
        assert [(s.position, s.name) for s in listed] == [
            (0, "reserve"),
            (1, "charge"),
            (2, "ship"),
            (3, "notify"),
        ]

    async def test_every_field_of_a_record_round_trips(self, parity: ParityEnv) -> None:
        """Rule: a record comes back as written: status, result, error, position and created_at."""
        claimed = await _running(parity)
        steps = [
            _step(claimed, "done-step", position=0, result='{"a": [1, 2.5, null]}'),
            _step(
                claimed,
                "error-step",
                status="error",
                result=None,
                error='{"type": "Boom", "message": "caf\\u00e9", "terminal": false}',
                position=1,
                created_at_ms=parity.clock.now_ms(),
            ),
            _step(claimed, "pending-step", status="pending", result='{"since_ms": 5}', position=2),
        ]
        for step in steps:
            assert await _steps(parity).put(claimed.claim, step)
        assert await _steps(parity).list(claimed.run_id, claimed.queue) == steps

    async def test_a_run_without_steps_lists_nothing(self, parity: ParityEnv) -> None:
        """Rule: `list` of a run nothing was recorded for is empty."""
        claimed = await _running(parity)
        assert await _steps(parity).list(claimed.run_id, claimed.queue) == []

    async def test_list_is_per_run(self, parity: ParityEnv) -> None:
        """Rule: records are kept per run id; another run's records are not listed."""
        first = await _running(parity)
        second = await _running(parity)
        mine, theirs = _step(first, "charge"), _step(second, "charge", result='{"charge": "x"}')
        assert await _steps(parity).put(first.claim, mine)
        assert await _steps(parity).put(second.claim, theirs)
        assert await _steps(parity).list(first.run_id, first.queue) == [mine]
        assert await _steps(parity).list(second.run_id, second.queue) == [theirs]

    async def test_a_claim_built_without_its_queue_is_the_same_fence(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the fence is (job, worker id, claims); a claim built without its queue still holds."""
        claimed = await _running(parity)
        by_hand = Claim(job_id=claimed.id, worker_id=claimed.worker_id, claims=claimed.claims)
        assert await _steps(parity).put(by_hand, _step(claimed)) is True
        listed = await _steps(parity).list(claimed.run_id, claimed.queue)
        assert [s.name for s in listed] == ["charge"]


@pytest.mark.requires("steps")
class TestStepPutFence:
    async def test_a_put_from_another_worker_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a step write is fenced on the claim's worker id; another worker's write answers False and writes nothing."""
        claimed = await _running(parity)
        intruder = replace(claimed.claim, worker_id="worker-b")
        landed = await _steps(parity).put(intruder, _step(claimed))
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (False, [])

    async def test_a_put_under_an_earlier_claim_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a step write is fenced on the claims count; the same worker's earlier claim answers False, the live one lands."""
        first, second = await _reclaimed(parity)
        stale = await _steps(parity).put(first.claim, _step(first, "stale"))
        live = await _steps(parity).put(second.claim, _step(second, "live"))
        listed = await _steps(parity).list(second.run_id, second.queue)
        assert (stale, live, [s.name for s in listed]) == (False, True, ["live"])

    async def test_a_put_after_the_job_completed_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a step write is fenced on `state = 'running'`; after the ack it answers False."""
        claimed = await _running(parity)
        assert await parity.backend.jobs.ack(claimed.claim)
        landed = await _steps(parity).put(claimed.claim, _step(claimed))
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (False, [])

    async def test_a_put_after_the_job_was_cancelled_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a cancel ends the running state; a step write under the old claim answers False."""
        claimed = await _running(parity)
        await parity.cancel(claimed.id, "operator asked")
        landed = await _steps(parity).put(claimed.claim, _step(claimed))
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (False, [])

    async def test_a_put_while_the_job_is_parked_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a parked (`waiting`) job is not running; a step write under its last claim answers False."""
        claimed = await _running(parity)
        park = parking(parity.clock.now_ms() + HOUR_MS)
        assert await parity.backend.jobs.nack(claimed.claim, park)
        landed = await _steps(parity).put(claimed.claim, _step(claimed))
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (False, [])

    async def test_a_put_for_an_unknown_job_is_refused(self, parity: ParityEnv) -> None:
        """Rule: no running job holds a claim nobody was given; its write answers False."""
        ghost = Claim(job_id=new_id(), worker_id="worker-a", claims=1)
        step = StepRecord(new_id(), "charge", "done", '{"ok": true}', None, 0, 1_000)
        assert await _steps(parity).put(ghost, step) is False
        assert await _steps(parity).list(step.run_id, "parity") == []


@pytest.mark.requires("steps")
class TestStepMemo:
    async def test_a_done_record_is_never_overwritten(self, parity: ParityEnv) -> None:
        """Rule: a memoized (`done`) record is never overwritten: a later put of its name, whatever its status, answers False."""
        claimed = await _running(parity)
        first = _step(claimed, result='{"charge": "ch_1"}')
        assert await _steps(parity).put(claimed.claim, first)
        later = [
            await _steps(parity).put(
                claimed.claim,
                _step(claimed, status=status, result='{"charge": "ch_2"}', created_at_ms=2_000),
            )
            for status in ("done", "error", "pending")
        ]
        listed = await _steps(parity).list(claimed.run_id, claimed.queue)
        assert (later, listed) == ([False, False, False], [first])

    @pytest.mark.parametrize("status", ["pending", "error"])
    async def test_a_pending_or_error_record_is_replaced(
        self, parity: ParityEnv, status: str
    ) -> None:
        """Rule: a record of the same name that is not `done` is replaced by the next put."""
        claimed = await _running(parity)
        earlier = _step(claimed, status=status, result=None, error='{"type": "Boom"}')
        done = _step(claimed, result='{"charge": "ch_1"}', created_at_ms=2_000)
        assert await _steps(parity).put(claimed.claim, earlier)
        landed = await _steps(parity).put(claimed.claim, done)
        assert (landed, await _steps(parity).list(claimed.run_id, claimed.queue)) == (True, [done])

    async def test_a_pending_record_can_be_replaced_by_another_pending_one(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only `done` is kept; a pending wait's state is overwritten by the next one."""
        claimed = await _running(parity)
        first = _step(claimed, "paid", status="pending", result='{"since_ms": 1}')
        second = _step(claimed, "paid", status="pending", result='{"since_ms": 2}')
        assert await _steps(parity).put(claimed.claim, first)
        assert await _steps(parity).put(claimed.claim, second)
        assert await _steps(parity).list(claimed.run_id, claimed.queue) == [second]

    async def test_a_refused_done_write_leaves_the_other_records_alone(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the memo is per name: a refused overwrite of one step does not touch another."""
        claimed = await _running(parity)
        reserve = _step(claimed, "reserve", position=0)
        charge = _step(claimed, "charge", status="error", result=None, error="{}", position=1)
        for step in (reserve, charge):
            assert await _steps(parity).put(claimed.claim, step)
        refused = await _steps(parity).put(claimed.claim, replace(reserve, result='{"x": 2}'))
        listed = await _steps(parity).list(claimed.run_id, claimed.queue)
        assert (refused, listed) == (False, [reserve, charge])


@pytest.mark.requires("steps")
class TestStepWriteFence:
    async def test_a_step_write_after_the_claim_moved_on_is_lease_lost(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a step's write is fenced on the run's claim: once another worker holds the job, the
        write raises LeaseLostError (XJOBS_LEASE_LOST), nothing is recorded, and the run settles
        nothing over the new holder."""
        caught: list[XJobsError] = []
        taken: list[ClaimedJob] = []

        async def take_the_claim_away() -> str:
            # The lease lapses on the manual clock and another worker claims the job, while the
            # step runs: the step's result is then written under a claim that moved on.
            taken.append(await reclaim_lapsed(parity, QUEUE, lease_ms=HELD_LEASE_MS))
            return "ch_1"

        # Attempts to spare: the lapsed lease is reclaimed, not buried as a final attempt.
        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def flow(ctx: JobContext, input: Item) -> None:
            await ctx.step.run("reserve", lambda: "r-1")
            try:
                await ctx.step.run("charge", take_the_claim_away)
            except XJobsError as error:
                caught.append(error)
                raise

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            # One slot: while its run is in flight this worker cannot claim the lapsed job itself.
            stats = await within(
                app.run_worker(until_idle=True, lease=HELD_LEASE, concurrency=1),
                what="the run to end",
            )
            record = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
        ((error,), (holder,)) = (caught, taken)
        assert (type(error), error.code) == (LeaseLostError, "XJOBS_LEASE_LOST")
        assert [(s.name, s.status) for s in steps] == [("reserve", "done")]
        assert (stats.lease_lost, stats.completed, stats.retried) == (1, 0, 0)
        assert (record.state, record.claimed_by, record.claims, record.last_error) == (
            "running",
            "worker-b",
            holder.claims,
            None,
        )
        assert await parity.backend.jobs.ack(holder.claim) is True  # the new holder is intact

    async def test_a_step_write_after_the_job_was_cancelled_is_aborted(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a cancelled run writes nothing more: once its heartbeat saw the cancel, the step's
        write raises AbortedError (XJOBS_ABORTED) and a step started after it is refused the same."""
        caught: list[XJobsError] = []
        interrupted: list[bool] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            async def cancel_and_outlive_it() -> str:
                await parity.cancel(ctx.job_id, "operator said so")
                try:
                    # The next heartbeat (every 100 ms of a 300 ms lease) misses, reads the job
                    # cancelled and aborts the run, which cancels this sleep.
                    await asyncio.sleep(WAIT_S)
                except asyncio.CancelledError:
                    interrupted.append(ctx.cancelled)
                return "ch_1"  # ... and the step still tries to record its result.

            await ctx.step.run("reserve", lambda: "r-1")
            for name, fn in (("charge", cancel_and_outlive_it), ("after", lambda: "never")):
                try:
                    await ctx.step.run(name, fn)
                except XJobsError as error:
                    caught.append(error)

        async with parity.app(jobs=[flow]) as app:
            result = await flow.enqueue(Item())
            stats = await within(
                app.run_worker(until_idle=True, lease=LEASE),
                what="the cancelled run to end",
                timeout_s=WAIT_S * 2,
            )
            record = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
        assert interrupted == [True], "the heartbeat never aborted the cancelled run"
        assert [(type(e), e.code) for e in caught] == [
            (AbortedError, "XJOBS_ABORTED"),
            (AbortedError, "XJOBS_ABORTED"),
        ]
        assert [(s.name, s.status) for s in steps] == [("reserve", "done")]
        assert (stats.cancelled, stats.completed, stats.lease_lost) == (1, 0, 0)
        assert record.state == "cancelled"


@pytest.mark.requires("events")
class TestBusClock:
    async def test_now_is_the_injected_clock(self, parity: ParityEnv) -> None:
        """Rule: `now()` is the bus's one clock; under an injected clock it reads that clock."""
        before = await _bus(parity).now()
        moved = parity.clock.advance(1_234)
        assert (before, await _bus(parity).now()) == (moved - 1_234, moved)

    async def test_send_stamps_the_event_with_now(self, parity: ParityEnv) -> None:
        """Rule: `send` stores the event stamped `now()` and answers it."""
        parity.clock.advance(77)
        now = await _bus(parity).now()
        sent = await _bus(parity).send(EVENT, '{"order": "o-1"}')
        assert (sent.name, json.loads(sent.payload), sent.sent_at_ms) == (
            EVENT,
            {"order": "o-1"},
            now,
        )
        assert _seen(await _bus(parity).find(EVENT, "{}", now)) == _seen(sent)

    async def test_every_send_gets_its_own_id(self, parity: ParityEnv) -> None:
        """Rule: each send stores one event, with an id of its own."""
        sent = [await _bus(parity).send(EVENT, "{}") for _ in range(3)]
        assert len({event.id for event in sent}) == 3


@pytest.mark.requires("events")
class TestFind:
    async def test_find_answers_the_earliest_match_at_or_after_since(
        self, parity: ParityEnv
    ) -> None:
        """Rule: find answers the earliest stored event of the name matching, sent at or after `since_ms`."""
        bus = _bus(parity)
        sent: list[EventRecord] = []
        for n in range(4):
            sent.append(await bus.send(EVENT, json.dumps({"n": n % 2})))
            parity.clock.advance(10)
        zero_a, one_a, zero_b, one_b = sent
        assert _seen(await bus.find(EVENT, '{"n": 0}', 0)) == _seen(zero_a)
        assert _seen(await bus.find(EVENT, '{"n": 0}', zero_a.sent_at_ms)) == _seen(zero_a)
        assert _seen(await bus.find(EVENT, '{"n": 0}', zero_a.sent_at_ms + 1)) == _seen(zero_b)
        assert _seen(await bus.find(EVENT, '{"n": 1}', one_a.sent_at_ms + 1)) == _seen(one_b)
        assert await bus.find(EVENT, '{"n": 1}', one_b.sent_at_ms + 1) is None
        assert _seen(await bus.find(EVENT, "{}", one_a.sent_at_ms)) == _seen(one_a)

    async def test_find_ignores_earlier_events(self, parity: ParityEnv) -> None:
        """Rule: an event sent before `since_ms` is never found, however well it matches."""
        await _bus(parity).send(EVENT, '{"order": "o-1"}')
        since = parity.clock.advance(1)
        assert await _bus(parity).find(EVENT, '{"order": "o-1"}', since) is None

    async def test_find_ignores_events_that_do_not_match(self, parity: ParityEnv) -> None:
        """Rule: find skips the events of the name whose payload does not match."""
        bus = _bus(parity)
        await bus.send(EVENT, '{"order": "o-8"}')
        await bus.send(EVENT, '{"amount": 5}')
        parity.clock.advance(5)
        wanted = await bus.send(EVENT, '{"order": "o-7", "amount": 5}')
        found = await bus.find(EVENT, '{"order": "o-7"}', 0)
        assert _seen(found) == _seen(wanted)
        assert await bus.find(EVENT, '{"order": "o-9"}', 0) is None

    async def test_find_reads_only_its_events_name(self, parity: ParityEnv) -> None:
        """Rule: find answers events of `name` only."""
        await _bus(parity).send(OTHER_EVENT, '{"order": "o-1"}')
        assert await _bus(parity).find(EVENT, '{"order": "o-1"}', 0) is None

    async def test_events_sent_in_one_ms_come_by_id(self, parity: ParityEnv) -> None:
        """Rule: find orders by `sent_at_ms`, then id."""
        sent = [await _bus(parity).send(EVENT, "{}") for _ in range(4)]
        assert len({event.sent_at_ms for event in sent}) == 1
        first = min(sent, key=lambda event: event.id)
        assert _seen(await _bus(parity).find(EVENT, "{}", 0)) == _seen(first)

    @pytest.mark.parametrize(
        ("payload", "match", "found"),
        [
            ('{"n": 1}', '{"n": 1.0}', True),
            ('{"n": 1}', '{"n": true}', False),
            ('{"n": true}', '{"n": 1}', False),
            ('{"n": "1"}', '{"n": 1}', False),
            ('{"a": {"x": 1, "y": [1, 2]}}', '{"a": {"y": [1, 2.0], "x": 1}}', True),
            ('{"a": {"x": 1, "y": 2}}', '{"a": {"x": 1}}', False),
            ('{"a": [1, 2]}', '{"a": [2, 1]}', False),
            ('{"a": []}', '{"a": {}}', False),
            ('{"a": null}', '{"a": null}', True),
            ("{}", '{"a": null}', False),
            ('{"a": 1, "b": 2}', '{"a": 1}', True),
            ('{"a": 1}', "{}", True),
        ],
    )
    async def test_match_is_top_level_keys_with_equal_json_values(
        self, parity: ParityEnv, payload: str, match: str, found: bool
    ) -> None:
        """Rule: each top-level key of the match is in the payload with an equal JSON value (deep
        equality; `true` is not `1`, `1` is `1.0`)."""
        sent = await _bus(parity).send(EVENT, payload)
        answer = await _bus(parity).find(EVENT, match, 0)
        assert _seen(answer) == (_seen(sent) if found else None)


@pytest.mark.requires("events")
class TestPark:
    async def test_park_leaves_the_job_waiting_due_at_run_at(self, parity: ParityEnv) -> None:
        """Rule: a park is the driver's `nack(park)`: `waiting`, the attempt handed back, due at `run_at_ms`."""
        claimed = await _running(parity)
        run_at = parity.clock.now_ms() + HOUR_MS
        landed = await _bus(parity).park(claimed.claim, _wait(claimed), parking(run_at))
        record = await parity.record(claimed.id)
        assert landed is True
        assert (record.state, record.attempt, record.claims, record.run_at_ms) == (
            "waiting",
            claimed.attempt - 1,
            claimed.claims,
            run_at,
        )

    async def test_a_parked_job_is_not_claimable_before_run_at(self, parity: ParityEnv) -> None:
        """Rule: a parked job is due at `run_at_ms` and not before."""
        claimed, run_at = await _parked(parity)
        parity.clock.set(run_at - 1)
        early = await parity.claim(worker_id="worker-b")
        parity.clock.set(run_at)
        again = await parity.claim_one(worker_id="worker-b")
        assert (early.jobs, again.id, again.run_id) == ((), claimed.id, claimed.run_id)

    async def test_a_wait_forever_park_is_due_only_at_wait_forever(self, parity: ParityEnv) -> None:
        """Rule: a wait without deadline parks at WAIT_FOREVER_MS."""
        claimed, _ = await _parked(parity, run_at_ms=WAIT_FOREVER_MS)
        parity.clock.advance(365 * 24 * HOUR_MS)
        idle = await parity.claim(worker_id="worker-b")
        assert (idle.jobs, await _due(parity, claimed.id)) == ((), ("waiting", WAIT_FOREVER_MS))

    async def test_a_park_from_another_worker_is_refused(self, parity: ParityEnv) -> None:
        """Rule: the park is fenced like nack: another worker's claim answers False and moves nothing."""
        claimed = await _running(parity)
        before = await parity.record(claimed.id)
        intruder = replace(claimed.claim, worker_id="worker-b")
        landed = await _bus(parity).park(
            intruder, _wait(claimed), parking(parity.clock.now_ms() + 10)
        )
        assert (landed, await parity.record(claimed.id)) == (False, before)

    async def test_a_park_under_an_earlier_claim_is_refused(self, parity: ParityEnv) -> None:
        """Rule: the park is fenced on the claims count: an earlier claim answers False."""
        first, second = await _reclaimed(parity)
        before = await parity.record(second.id)
        landed = await _bus(parity).park(
            first.claim, _wait(first), parking(parity.clock.now_ms() + 10)
        )
        assert (landed, await parity.record(second.id)) == (False, before)

    async def test_a_park_after_the_job_completed_is_refused(self, parity: ParityEnv) -> None:
        """Rule: the park is fenced on `state = 'running'`: after the ack it answers False."""
        claimed = await _running(parity)
        assert await parity.backend.jobs.ack(claimed.claim)
        landed = await _bus(parity).park(claimed.claim, _wait(claimed), parking(WAIT_FOREVER_MS))
        assert (landed, (await parity.record(claimed.id)).state) == (False, "completed")

    async def test_a_park_after_the_job_was_cancelled_is_refused(self, parity: ParityEnv) -> None:
        """Rule: the park is fenced on `state = 'running'`: after a cancel it answers False."""
        claimed = await _running(parity)
        await parity.cancel(claimed.id)
        landed = await _bus(parity).park(claimed.claim, _wait(claimed), parking(WAIT_FOREVER_MS))
        assert (landed, (await parity.record(claimed.id)).state) == (False, "cancelled")

    async def test_a_refused_park_registers_no_wait(self, parity: ParityEnv) -> None:
        """Rule: the register and the park are one step: a park whose fence missed leaves no wait behind."""
        claimed = await _running(parity)
        now = parity.clock.now_ms()
        intruder = replace(claimed.claim, worker_id="worker-b")
        wait = _wait(claimed, since_ms=now, deadline_ms=now + 10)
        assert await _bus(parity).park(intruder, wait, parking(now + 10)) is False
        assert await _bus(parity).purge_expired(now + 11) == 0

    async def test_an_event_sent_at_since_makes_the_park_due_now(self, parity: ParityEnv) -> None:
        """Rule: a park is due now when a matching event was sent at or after the wait's since_ms
        (the event sent between the run's last look and the park is not lost)."""
        claimed = await _running(parity)
        sent = await _bus(parity).send(EVENT, '{"order": "o-7"}')
        now = parity.clock.advance(20)
        wait = _wait(claimed, match='{"order": "o-7"}', since_ms=sent.sent_at_ms)
        landed = await _bus(parity).park(claimed.claim, wait, parking(now + HOUR_MS))
        assert (landed, await _due(parity, claimed.id)) == (True, ("waiting", now))
        assert (await parity.claim_one(worker_id="worker-b")).id == claimed.id

    async def test_an_event_sent_before_since_leaves_the_park_at_run_at(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only events sent at or after since_ms count; an older one leaves the park due at run_at."""
        claimed = await _running(parity)
        await _bus(parity).send(EVENT, "{}")
        since = parity.clock.advance(1)
        landed = await _bus(parity).park(
            claimed.claim, _wait(claimed, since_ms=since), parking(since + 50)
        )
        assert (landed, await _due(parity, claimed.id)) == (True, ("waiting", since + 50))

    async def test_an_event_that_does_not_match_leaves_the_park_at_run_at(
        self, parity: ParityEnv
    ) -> None:
        """Rule: only a matching event since the wait began makes the park due now."""
        claimed = await _running(parity)
        since = parity.clock.now_ms()
        await _bus(parity).send(EVENT, '{"order": "o-8"}')
        await _bus(parity).send(OTHER_EVENT, '{"order": "o-7"}')
        wait = _wait(claimed, match='{"order": "o-7"}', since_ms=since)
        landed = await _bus(parity).park(claimed.claim, wait, parking(since + 50))
        assert (landed, await _due(parity, claimed.id)) == (True, ("waiting", since + 50))

    async def test_a_new_park_replaces_the_jobs_earlier_wait(self, parity: ParityEnv) -> None:
        """Rule: a park replaces the job's earlier wait (a job waits for one event at a time)."""
        claimed, _ = await _parked(parity, run_at_ms=parity.clock.now_ms(), event=OTHER_EVENT)
        again = await parity.claim_one(worker_id="worker-b")
        assert again.id == claimed.id
        run_at = parity.clock.now_ms() + HOUR_MS
        wait = _wait(again, since_ms=parity.clock.now_ms())
        assert await _bus(parity).park(again.claim, wait, parking(run_at))
        parity.clock.advance(5)
        await _bus(parity).send(OTHER_EVENT, "{}")
        after_old = await _due(parity, claimed.id)
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}")
        assert (after_old, await _due(parity, claimed.id)) == (
            ("waiting", run_at),
            ("waiting", now),
        )


@pytest.mark.requires("events")
class TestSendWakes:
    async def test_a_matching_send_makes_the_parked_job_due_now(self, parity: ParityEnv) -> None:
        """Rule: a send wakes a parked run whose wait it matches: its job stays `waiting`, due now, and is claimable."""
        claimed, _ = await _parked(parity, match='{"order": "o-7"}')
        assert (await parity.claim(worker_id="worker-b")).jobs == ()
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, '{"order": "o-7", "amount": 12.5}')
        woke = await _due(parity, claimed.id)
        again = await parity.claim_one(worker_id="worker-b")
        assert woke == ("waiting", now)
        assert (again.id, again.run_id, again.attempt) == (claimed.id, claimed.run_id, 1)

    async def test_a_matched_wait_is_dropped(self, parity: ParityEnv) -> None:
        """Rule: the waits a send matched are dropped: a second matching send does not move the job again."""
        claimed, _ = await _parked(parity)
        first = parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}")
        parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}")
        assert await _due(parity, claimed.id) == ("waiting", first)

    async def test_a_matched_wait_is_gone_from_the_purge(self, parity: ParityEnv) -> None:
        """Rule: a matched wait is dropped with its deadline: no later purge finds it."""
        now = parity.clock.now_ms()
        await _parked(parity, deadline_ms=now + 10)
        await _bus(parity).send(EVENT, "{}")
        parity.clock.advance(20)
        # The event itself (sent at `now`) is the one row the purge deletes.
        assert await _bus(parity).purge_expired(now + 11) == 1

    async def test_a_send_that_does_not_match_leaves_the_wait(self, parity: ParityEnv) -> None:
        """Rule: a non-matching send (or another event's) leaves the run parked and its wait in place."""
        claimed, run_at = await _parked(parity, match='{"order": "o-7"}')
        parity.clock.advance(5)
        await _bus(parity).send(EVENT, '{"order": "o-8"}')
        await _bus(parity).send(OTHER_EVENT, '{"order": "o-7"}')
        missed = await _due(parity, claimed.id)
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, '{"order": "o-7"}')
        assert (missed, await _due(parity, claimed.id)) == (("waiting", run_at), ("waiting", now))

    async def test_one_send_wakes_every_matching_wait(self, parity: ParityEnv) -> None:
        """Rule: a send wakes EVERY parked run whose wait it matches."""
        jobs = [(await _parked(parity, match=m))[0] for m in ('{"sku": "A"}', "{}", '{"sku": "B"}')]
        now = parity.clock.advance(5)
        await _bus(parity).send(EVENT, '{"sku": "A"}')
        due = [(await _due(parity, j.id))[1] == now for j in jobs]
        assert due == [True, True, False]

    async def test_a_wait_under_another_run_id_does_not_wake_the_job(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a send wakes a job only if it still waits under the wait's run id."""
        claimed, run_at = await _parked(parity, run_id=new_id())
        parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}")
        assert await _due(parity, claimed.id) == ("waiting", run_at)

    async def test_a_job_that_stopped_waiting_is_not_woken(self, parity: ParityEnv) -> None:
        """Rule: a send moves a job from `waiting` only; a cancelled job stays as it is."""
        claimed, _ = await _parked(parity)
        cancelled = await parity.cancel(claimed.id, "no longer needed")
        parity.clock.advance(5)
        await _bus(parity).send(EVENT, "{}")
        assert await parity.record(claimed.id) == cancelled


@pytest.mark.requires("events")
class TestPurge:
    async def test_purge_deletes_old_events_and_lapsed_waits_and_counts_them(
        self, parity: ParityEnv
    ) -> None:
        """Rule: purge_expired deletes events sent before the cutoff and waits whose deadline passed
        before it, keeps the newer ones, and answers how many went."""
        bus = _bus(parity)
        start = parity.clock.now_ms()
        await bus.send(EVENT, "{}")
        await bus.send(OTHER_EVENT, "{}")
        waits = [
            (await _parked(parity, event=LATER_EVENT, deadline_ms=deadline))[0]
            for deadline in (start + 10, start + 20, None)
        ]
        cutoff = parity.clock.advance(20)
        kept = await bus.send(EVENT, "{}")
        purged = await bus.purge_expired(cutoff)
        assert purged == 3  # two events sent at `start`, the wait whose deadline was start + 10
        assert _seen(await bus.find(EVENT, "{}", 0)) == _seen(kept)
        assert await bus.find(OTHER_EVENT, "{}", 0) is None
        now = parity.clock.advance(5)
        await bus.send(LATER_EVENT, "{}")
        woke = [(await _due(parity, j.id))[1] == now for j in waits]
        assert woke == [False, True, True]  # the purged wait no longer wakes its job

    async def test_an_event_or_deadline_at_the_cutoff_stays(self, parity: ParityEnv) -> None:
        """Rule: the cutoff is exclusive: an event sent at it, or a wait whose deadline is it, stays."""
        at = parity.clock.now_ms()
        sent = await _bus(parity).send(EVENT, "{}")
        await _parked(parity, event=LATER_EVENT, deadline_ms=at)
        assert await _bus(parity).purge_expired(at) == 0
        assert _seen(await _bus(parity).find(EVENT, "{}", 0)) == _seen(sent)

    async def test_a_purge_with_nothing_expired_answers_zero(self, parity: ParityEnv) -> None:
        """Rule: purge_expired answers how many went; on an empty bus that is none."""
        assert await _bus(parity).purge_expired(parity.clock.now_ms()) == 0

    async def test_a_second_purge_finds_nothing_left(self, parity: ParityEnv) -> None:
        """Rule: what a purge deleted is gone; purging again at the same cutoff answers 0."""
        await _bus(parity).send(EVENT, "{}")
        await _parked(parity, event=LATER_EVENT, deadline_ms=parity.clock.now_ms())
        cutoff = parity.clock.advance(1)
        assert (
            await _bus(parity).purge_expired(cutoff),
            await _bus(parity).purge_expired(cutoff),
        ) == (
            2,
            0,
        )
