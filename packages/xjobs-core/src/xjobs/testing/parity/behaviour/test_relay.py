"""Parity: the relay role through an App: staged rows published once, a crash between publish and
mark deduped, the two-phase drain (semantics.md, "The transactional outbox")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from xjobs import JobContext, RelayStats, job
from xjobs.app import App
from xjobs.contract.driver import EnqueueResult, JobDriver, NewJob
from xjobs.contract.stores import OutboxStore
from xjobs.declare.job import EnqueueOptions, JobHandle
from xjobs.enqueue.facade import JobsFacade
from xjobs.errors import OutboxConnectionInvalidError, WorkerStateError
from xjobs.memory.outbox import MemoryOutboxStore
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    QUEUE,
    CountingDriver,
    Item,
    key_of,
    org_of,
    within,
)

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("outbox")]

DELAY = timedelta(minutes=5)
DELAY_MS = 300_000


def _outbox(parity: ParityEnv) -> OutboxStore:
    outbox = parity.backend.outbox
    assert outbox is not None, 'mark the scenario @pytest.mark.requires("outbox")'
    return outbox


def _memory_outbox(parity: ParityEnv) -> MemoryOutboxStore:
    """The memory outbox, whose `MemoryTransaction` stands in for a caller's transaction.

    `stage_on` needs a real caller transaction, which differs per backend; the Postgres one
    (psycopg and asyncpg connections) is covered by that package's tests.
    """
    if parity.backend.name != "memory":
        pytest.skip(
            f"stage_on needs a caller transaction of the {parity.backend.name} backend's own "
            "kind; only the memory one is backend-neutral (others cover it in their package)"
        )
    outbox = parity.backend.outbox
    assert isinstance(outbox, MemoryOutboxStore)
    return outbox


async def stage(
    parity: ParityEnv,
    handle: JobHandle[Any],
    inputs: Sequence[Item],
    *,
    delay: timedelta | None = None,
) -> tuple[list[NewJob], list[EnqueueResult]]:
    """Stage `inputs` of `handle` through the store's own transaction, built as `stage()` builds them.

    The rows come from the same facade `handle.stage` goes through (validated, keyed, encoded), so
    the role scenarios need no caller transaction of the backend's own kind.
    """
    facade = JobsFacade(
        parity.backend.jobs, parity.clock, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES
    )
    rows = facade.build(handle, inputs, EnqueueOptions(delay=delay))
    results = await _outbox(parity).stage(rows)
    return rows, results


def _recording_job(ran: list[tuple[str, str, Item]]) -> JobHandle[Item]:
    @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
    async def relayed(ctx: JobContext, input: Item) -> None:
        ran.append((ctx.job_id, ctx.run_id, input))

    return relayed


def _items(count: int, prefix: str = "k") -> list[Item]:
    return [Item(key=f"{prefix}-{n}") for n in range(count)]


def _stage_then_fail(
    outbox: MemoryOutboxStore, handle: JobHandle[Item], staged: list[EnqueueResult]
) -> None:
    """The caller's transaction: a stage, then work that raises before the commit."""
    with outbox.transaction() as tx:
        staged.append(handle.stage(tx, Item()))
        raise RuntimeError("the caller's work failed")


class HeldEnqueue(CountingDriver):
    """A job driver whose enqueue (the relay's publish) waits for `release` once it has entered."""

    def __init__(self, inner: JobDriver) -> None:
        super().__init__(inner)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        self.entered.set()
        await self.release.wait()
        return await super().enqueue(jobs)


class TestRelayPublishes:
    async def test_until_idle_publishes_every_staged_row_and_each_runs_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `run_relay(until_idle=True)` publishes every staged row; the worker then runs each
        job once, with the staged input, under the job id and run id that `stage` answered."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        inputs = _items(4)
        app = parity.app(jobs=[relayed])
        async with app:
            _, results = await stage(parity, relayed, inputs)
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            pending = await _outbox(parity).pending()
            worker = await within(app.run_worker(until_idle=True), what="an idle worker")
        assert isinstance(stats, RelayStats)
        assert (stats.published, stats.deduped, stats.lost, pending) == (4, 0, 0, 0)
        assert worker.completed == 4
        assert sorted(ran, key=lambda r: r[2].key) == sorted(
            ((r.job_id, r.run_id, i) for r, i in zip(results, inputs, strict=True)),
            key=lambda r: r[2].key,
        )

    async def test_a_relayed_job_is_the_staged_row(self, parity: ParityEnv) -> None:
        """Rule: the published job carries the staged row's columns: its name, queue, idempotency
        key, tenant, payload, priority and attempts, and it is `ready`."""
        relayed = _recording_job([])
        app = parity.app(jobs=[relayed])
        async with app:
            (row,), _ = await stage(parity, relayed, [Item(org="org-9", key="order-1")])
            await within(app.run_relay(until_idle=True), what="an idle relay")
            record = await parity.record(row.id)
        assert (record.run_id, record.name, record.queue, record.idempotency_key) == (
            row.run_id,
            row.name,
            row.queue,
            "order-1",
        )
        assert (record.tenant_id, record.priority, record.max_attempts) == (
            row.tenant_id,
            row.priority,
            row.max_attempts,
        )
        assert (record.state, record.attempt) == ("ready", 0)
        assert Item.model_validate_json(record.payload) == Item(org="org-9", key="order-1")

    async def test_an_empty_outbox_relays_nothing(self, parity: ParityEnv) -> None:
        """Rule: an until_idle relay over an empty outbox ends after one pass that found nothing."""
        app = parity.app(jobs=[_recording_job([])])
        async with app:
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
        assert stats.as_dict() == {"passes": 1, "published": 0, "deduped": 0, "lost": 0}

    async def test_rows_already_published_are_deduped_and_marked(self, parity: ParityEnv) -> None:
        """Rule: a pass whose rows were already published (the relay died between publish and
        mark) counts them deduped and marks them; each job runs once."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        app = parity.app(jobs=[relayed])
        async with app:
            rows, results = await stage(parity, relayed, _items(3))
            first = await parity.backend.jobs.enqueue(rows)  # the crashed relay's publish
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            pending = await _outbox(parity).pending()
            worker = await within(app.run_worker(until_idle=True), what="an idle worker")
        assert [r.deduped for r in first] == [False, False, False]
        assert (stats.published, stats.deduped, stats.lost, pending) == (0, 3, 0, 0)
        assert worker.completed == 3
        assert sorted(job_id for job_id, _, _ in ran) == sorted(r.job_id for r in results)

    async def test_a_finished_job_republished_is_not_run_again(self, parity: ParityEnv) -> None:
        """Rule: a repeated publish of a job that already finished is deduped: it never runs twice."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        app = parity.app(jobs=[relayed])
        async with app:
            rows, _ = await stage(parity, relayed, _items(2))
            await parity.backend.jobs.enqueue(rows)  # published, then the relay died
            await within(app.run_worker(until_idle=True), what="an idle worker")
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            again = await within(app.run_worker(until_idle=True), what="an idle worker")
            states = [(await parity.record(row.id)).state for row in rows]
        assert (stats.published, stats.deduped) == (0, 2)
        assert (again.claimed, len(ran), states) == (0, 2, ["completed", "completed"])

    async def test_two_relays_publish_each_row_once(self, parity: ParityEnv) -> None:
        """Rule: the claim is a lease: two relays passing at once publish each staged row once in
        all; every staged id becomes one job and nothing stays pending."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        app = parity.app(jobs=[relayed])
        async with app:
            _, results = await stage(parity, relayed, _items(9))
            relays = [app.relay(batch=2), app.relay(batch=2)]
            for _ in range(20):
                claimed = await asyncio.gather(*(relay.run_pass() for relay in relays))
                if claimed == [0, 0]:
                    break
            pending = await _outbox(parity).pending()
            records = [await parity.backend.jobs.get(r.job_id) for r in results]
            await within(app.run_worker(until_idle=True), what="an idle worker")
        assert pending == 0
        assert all(record is not None for record in records)
        assert sum(relay.stats.published for relay in relays) == 9
        assert sum(relay.stats.deduped for relay in relays) == 0
        assert sorted(job_id for job_id, _, _ in ran) == sorted(r.job_id for r in results)

    async def test_a_pass_claims_at_most_batch_rows(self, parity: ParityEnv) -> None:
        """Rule: a pass claims at most `batch` rows: with batch=2, five rows take three passes
        (2, 2, 1), and the fourth finds nothing."""
        app = parity.app(jobs=[relayed := _recording_job([])])
        async with app:
            await stage(parity, relayed, _items(5))
            relay = app.relay(batch=2)
            claimed = [await relay.run_pass() for _ in range(4)]
            pending = await _outbox(parity).pending()
        assert (claimed, pending) == ([2, 2, 1, 0], 0)
        assert (relay.stats.passes, relay.stats.published) == (4, 5)

    async def test_until_idle_passes_until_the_outbox_is_drained(self, parity: ParityEnv) -> None:
        """Rule: a full pass goes straight on to the next: an until_idle relay with batch=2 drains
        five rows in three passes and ends on the fourth, which finds nothing."""
        app = parity.app(jobs=[relayed := _recording_job([])])
        async with app:
            await stage(parity, relayed, _items(5))
            stats = await within(app.run_relay(until_idle=True, batch=2), what="an idle relay")
        assert (stats.passes, stats.published, stats.deduped) == (4, 5, 0)

    async def test_a_delayed_row_keeps_its_run_at(self, parity: ParityEnv) -> None:
        """Rule: a row staged with `delay=` is published with its run_at: the job is not claimable
        before it, and is once the clock reaches it."""
        app = parity.app(jobs=[relayed := _recording_job([])])
        async with app:
            staged_at = parity.clock.now_ms()
            (row,), _ = await stage(parity, relayed, [Item()], delay=DELAY)
            parity.clock.advance(1_000)  # the relay publishes later than the stage
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            record = await parity.record(row.id)
            before = await parity.claim({QUEUE: 10})
            parity.clock.set(staged_at + DELAY_MS)
            due = await parity.claim({QUEUE: 10})
        assert (stats.published, row.run_at_ms) == (1, staged_at + DELAY_MS)
        assert (record.state, record.run_at_ms) == ("ready", staged_at + DELAY_MS)
        assert before.jobs == ()
        assert [claimed.id for claimed in due.jobs] == [row.id]


class TestRelayDrain:
    async def test_stop_accepting_then_close_lets_the_pass_in_flight_finish(
        self, parity: ParityEnv
    ) -> None:
        """Rule: the relay drains in two phases: `stop_accepting()` starts no new pass, and
        `close()` waits out the pass in flight, which publishes and marks its rows."""
        relayed = _recording_job([])
        held = HeldEnqueue(parity.backend.jobs)
        app = App(replace(parity.backend, jobs=held), jobs=[relayed], clock=parity.clock)
        async with app:
            rows, _ = await stage(parity, relayed, _items(3))
            relay = app.relay()
            await relay.start()
            await within(held.entered.wait(), what="the relay's publish to start")
            relay.stop_accepting()
            draining = relay.state
            late, _ = await stage(parity, relayed, [Item(key="late")])  # staged after the stop
            closing = asyncio.create_task(relay.close())
            await asyncio.sleep(0.05)  # room for a close that does not wait to show it
            waited = not closing.done()
            held.release.set()
            await within(closing, what="the relay to close")
            pending = await _outbox(parity).pending()
            published = [await parity.backend.jobs.get(row.id) for row in rows + late]
        assert (draining, waited, relay.state) == ("draining", True, "closed")
        assert (relay.stats.passes, relay.stats.published, relay.stats.lost) == (1, 3, 0)
        assert held.enqueue_calls == [3]
        assert pending == 1, "the row staged after stop_accepting waits for the next relay"
        assert [record is not None for record in published] == [True, True, True, False]

    async def test_a_stopped_relay_cannot_start_again(self, parity: ParityEnv) -> None:
        """Rule: a relay starts once; a closed relay stays closed and a second close is quiet."""
        app = parity.app(jobs=[_recording_job([])])
        async with app:
            relay = app.relay()
            await relay.start()
            await relay.close()
            await relay.close()
            with pytest.raises(WorkerStateError, match="starts once"):
                await relay.start()
        assert relay.state == "closed"


class TestStageOnMemory:
    async def test_stage_on_a_transaction_commits_on_exit(self, parity: ParityEnv) -> None:
        """Rule: `handle.stage(tx, input)` writes inside the caller's transaction: nothing is
        pending before it commits, the row is once it does, and the relay publishes it under the
        ids `stage` answered."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        outbox = _memory_outbox(parity)
        app = parity.app(jobs=[relayed])
        async with app:
            with outbox.transaction() as tx:
                result = relayed.stage(tx, Item(key="order-1"))
                inside = await outbox.pending()
            committed = await outbox.pending()
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            await within(app.run_worker(until_idle=True), what="an idle worker")
        assert (inside, committed, stats.published, result.deduped) == (0, 1, 1, False)
        assert ran == [(result.job_id, result.run_id, Item(key="order-1"))]

    async def test_stage_many_on_a_transaction_answers_each_in_order(
        self, parity: ParityEnv
    ) -> None:
        """Rule: `handle.stage_many(tx, inputs)` answers one result per input, in order, with the
        job ids the relay then publishes."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        outbox = _memory_outbox(parity)
        inputs = _items(3)
        app = parity.app(jobs=[relayed])
        async with app:
            with outbox.transaction() as tx:
                results = relayed.stage_many(tx, inputs)
            await within(app.run_relay(until_idle=True), what="an idle relay")
            await within(app.run_worker(until_idle=True), what="an idle worker")
        assert len({r.job_id for r in results}) == 3
        by_key = {input.key: (job_id, run_id) for job_id, run_id, input in ran}
        assert [by_key[i.key] for i in inputs] == [(r.job_id, r.run_id) for r in results]

    async def test_a_rolled_back_transaction_leaves_no_job(self, parity: ParityEnv) -> None:
        """Rule: a rolled-back transaction leaves no job: a stage inside a transaction that raises
        is never pending and never published."""
        ran: list[tuple[str, str, Item]] = []
        relayed = _recording_job(ran)
        outbox = _memory_outbox(parity)
        app = parity.app(jobs=[relayed])
        async with app:
            staged: list[EnqueueResult] = []
            with pytest.raises(RuntimeError, match="the caller's work failed"):
                _stage_then_fail(outbox, relayed, staged)
            (result,) = staged
            pending = await outbox.pending()
            stats = await within(app.run_relay(until_idle=True), what="an idle relay")
            worker = await within(app.run_worker(until_idle=True), what="an idle worker")
            record = await parity.backend.jobs.get(result.job_id)
        assert (pending, stats.published, worker.claimed, record, ran) == (0, 0, 0, None, [])

    async def test_a_stage_on_an_ended_transaction_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a transaction that ended (committed or rolled back) takes no more stages, and a
        connection of a kind the store cannot use is `XJOBS_OUTBOX_CONNECTION_INVALID`."""
        relayed = _recording_job([])
        outbox = _memory_outbox(parity)
        app = parity.app(jobs=[relayed])
        async with app:
            with outbox.transaction() as tx:
                pass
            with pytest.raises(OutboxConnectionInvalidError, match="already ended") as ended:
                relayed.stage(tx, Item())
            with pytest.raises(OutboxConnectionInvalidError, match="MemoryTransaction") as foreign:
                relayed.stage(object(), Item())  # type: ignore[call-overload]
            pending = await outbox.pending()
        codes = (ended.value.code, foreign.value.code)
        assert codes == ("XJOBS_OUTBOX_CONNECTION_INVALID",) * 2
        assert pending == 0
