"""Parity: one run, from claim to settle, through the public API (semantics.md, "Execution")."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from xjobs import (
    Actor,
    JobContext,
    Retry,
    Settled,
    Terminal,
    current_actor,
    job,
    run_with_context,
)
from xjobs.errors import XJobsError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import (
    NOW_RETRY,
    QUEUE,
    Item,
    SettledLog,
    counting_app,
    key_of,
    org_of,
)

pytestmark = pytest.mark.xjobs_parity


class Boom(Exception):
    """An ordinary error: retried on the backoff curve."""


class Unfixable(Exception):
    """An error whose class says retrying cannot help."""

    terminal = True


class TestExecute:
    async def test_a_run_that_returns_completes(self, parity: ParityEnv) -> None:
        """Rule: a body that returns is acked: state `completed`, outcome `completed`."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt, record.finished_at_ms is not None) == (
            "completed",
            1,
            True,
        )
        assert (stats.claimed, stats.completed) == (1, 1)

    async def test_the_run_acts_for_the_declared_tenant_org_only(self, parity: ParityEnv) -> None:
        """Rule: execute_job installs the run's actor (org only) with run_with_context."""
        seen: list[Actor | None] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            seen.append(current_actor())

        app = parity.app(jobs=[body])
        async with app:
            await run_with_context(
                Actor(org_id="org-run", user_id="u-7"),
                lambda: body.enqueue(Item(org="org-run")),
            )
            await app.run_worker(until_idle=True)
        assert seen == [Actor(org_id="org-run", user_id=None)]

    async def test_a_tenant_none_run_acts_for_no_org(self, parity: ParityEnv) -> None:
        """Rule: `"none"` strips the org from the run's actor."""
        seen: list[Actor | None] = []
        tenants: list[str | None] = []

        @job(tenant="none", idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            seen.append(current_actor())
            tenants.append(ctx.tenant)

        app = parity.app(jobs=[body])
        async with app:
            await run_with_context(Actor(org_id="org-enqueuer"), lambda: body.enqueue(Item()))
            await app.run_worker(until_idle=True)
        assert len(seen) == 1
        assert seen[0] is not None
        assert seen[0].org_id is None
        assert tenants == [None]

    async def test_the_context_names_the_run(self, parity: ParityEnv) -> None:
        """Rule: ctx carries job_id, run_id, attempt, tenant and enqueued_by (attribution, never authority)."""
        contexts: list[JobContext] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            contexts.append(ctx)

        app = parity.app(jobs=[body])
        async with app:
            result = await run_with_context(
                Actor(user_id="u-7"), lambda: body.enqueue(Item(org="org-9"))
            )
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        (ctx,) = contexts
        assert (ctx.job_id, ctx.run_id) == (result.job_id, result.run_id)
        assert (ctx.name, ctx.queue, ctx.attempt) == ("body", QUEUE, 1)
        assert (ctx.tenant, ctx.enqueued_by) == ("org-9", "u-7")
        assert (record.enqueued_by, record.tenant_id) == ("u-7", "org-9")

    async def test_final_attempt_is_known_before_the_body_runs(self, parity: ParityEnv) -> None:
        """Rule: JobContext.final_attempt is known before the body runs (True exactly on the last attempt)."""
        seen: list[tuple[int, int, bool]] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            seen.append((ctx.attempt, ctx.max_attempts, ctx.final_attempt))
            raise Boom("again")

        app = parity.app(jobs=[body])
        async with app:
            await body.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert seen == [(1, 3, False), (2, 3, False), (3, 3, True)]

    async def test_a_stored_input_that_no_longer_validates_is_terminal(
        self, parity: ParityEnv
    ) -> None:
        """Rule: execute_job validates the input; a stored input its model refuses fails for good (no retry)."""
        ran: list[Item] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(input)

        app = parity.app(jobs=[body])
        async with app:
            row = parity.new_job(name="body", queue=QUEUE, payload=json.dumps({"org": 7}))
            await parity.backend.jobs.enqueue([row])
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(row.id)
        assert ran == []
        assert (record.state, record.attempt) == ("dead", 1)
        assert record.last_error is not None
        assert "XJOBS_INPUT_INVALID" in record.last_error
        assert stats.dead_lettered == 1


class TestRetry:
    async def test_an_error_retries_on_the_backoff_and_counts_the_attempt(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an error that is not terminal retries on the backoff curve: `ready`, last_error names it, attempt counted."""
        retry = Retry(attempts=3, base=timedelta(seconds=10), cap=timedelta(seconds=10))

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry)
        async def body(ctx: JobContext, input: Item) -> None:
            raise Boom("the ledger is locked")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            settled_at = parity.clock.now_ms()
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("ready", 1)
        assert record.last_error is not None
        assert "Boom: the ledger is locked" in record.last_error
        # full jitter on the upper half of the capped delay: within [5 s, 10 s] of the settle
        assert settled_at + 5_000 <= record.run_at_ms <= settled_at + 10_000
        assert (stats.retried, stats.completed, stats.dead_lettered) == (1, 0, 0)

    async def test_a_retry_is_not_claimable_before_its_time(self, parity: ParityEnv) -> None:
        """Rule: a retry waits out its backoff; it runs again once the clock reaches its run_at."""
        retry = Retry(attempts=3, base=timedelta(seconds=10), cap=timedelta(seconds=10))
        attempts: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry)
        async def body(ctx: JobContext, input: Item) -> None:
            attempts.append(ctx.attempt)
            if ctx.attempt == 1:
                raise Boom("first time unlucky")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            await app.run_worker(until_idle=True)
            parity.clock.advance(4_000)
            early = await app.run_worker(until_idle=True)
            parity.clock.advance(6_001)
            late = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (early.claimed, late.completed) == (0, 1)
        assert attempts == [1, 2]
        assert (record.state, record.attempt) == ("completed", 2)

    async def test_the_final_attempt_dead_letters(self, parity: ParityEnv) -> None:
        """Rule: an error on the final attempt dead-letters (`dead`, outcome `dead-lettered`) with dead_letter=True."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            raise Boom(f"attempt {ctx.attempt}")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("dead", 3)
        assert record.last_error is not None
        assert "Boom: attempt 3" in record.last_error
        assert (stats.retried, stats.dead_lettered, stats.dropped) == (2, 1, 0)

    async def test_the_final_attempt_drops_without_dead_letter(self, parity: ParityEnv) -> None:
        """Rule: with Retry(dead_letter=False) the final error fails for good: `failed`, outcome `dropped`."""
        retry = Retry(attempts=2, base=timedelta(0), cap=timedelta(0), dead_letter=False)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry)
        async def body(ctx: JobContext, input: Item) -> None:
            raise Boom("never")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("failed", 2)
        assert (stats.retried, stats.dropped, stats.dead_lettered) == (1, 1, 0)

    async def test_terminal_fails_for_good_on_the_first_attempt(self, parity: ParityEnv) -> None:
        """Rule: `xjobs.Terminal` fails for good, whatever attempts are left."""
        retry = Retry(attempts=5, base=timedelta(0), cap=timedelta(0), dead_letter=False)
        runs: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry)
        async def body(ctx: JobContext, input: Item) -> None:
            runs.append(ctx.attempt)
            raise Terminal("invoice i9 does not exist")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert runs == [1]
        assert (record.state, record.attempt) == ("failed", 1)
        assert record.last_error is not None
        assert "XJOBS_TERMINAL" in record.last_error
        assert (stats.dropped, stats.retried) == (1, 0)

    async def test_terminal_dead_letters_when_the_job_keeps_its_dead(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a terminal error skips the remaining attempts; with dead_letter=True it is kept `dead` for an operator."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            raise Terminal("cannot succeed")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.attempt) == ("dead", 1)
        assert (stats.dead_lettered, stats.retried) == (1, 0)

    async def test_an_error_class_marked_terminal_is_not_retried(self, parity: ParityEnv) -> None:
        """Rule: any error whose class says so (`terminal = True`) fails for good."""
        runs: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            runs.append(ctx.attempt)
            raise Unfixable("the account is closed")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert runs == [1]
        assert (record.state, record.attempt) == ("dead", 1)
        assert record.last_error is not None
        assert "Unfixable: the account is closed" in record.last_error

    async def test_a_timeout_cancels_the_body_then_fails_the_attempt(
        self, parity: ParityEnv
    ) -> None:
        """Rule: a deadline (`timeout`) CANCELS the body, then fails the attempt — never the reverse."""
        order: list[str] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=Retry(attempts=1),
            timeout=timedelta(milliseconds=50),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                state = (await app.get_job(ctx.job_id)).state
                order.append(f"body cancelled while {state}")
                raise

        async def hook(event: Settled) -> None:
            order.append(f"settled {event.outcome}")

        app = parity.app(jobs=[body], on_settled=hook)
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert order == ["body cancelled while running", "settled dead-lettered"]
        assert record.state == "dead"
        assert record.last_error is not None
        assert "XJOBS_TIMEOUT" in record.last_error
        assert stats.dead_lettered == 1

    async def test_a_timeout_is_retried_like_any_failure(self, parity: ParityEnv) -> None:
        """Rule: a timed-out attempt fails the attempt (counted, retried), it does not end the job."""
        attempts: list[int] = []

        @job(
            tenant=org_of,
            idempotency_key=key_of,
            queue=QUEUE,
            retry=NOW_RETRY,
            timeout=timedelta(milliseconds=30),
        )
        async def body(ctx: JobContext, input: Item) -> None:
            attempts.append(ctx.attempt)
            if ctx.attempt == 1:
                await asyncio.sleep(10)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert attempts == [1, 2]
        assert (record.state, record.attempt) == ("completed", 2)
        assert (stats.retried, stats.completed) == (1, 1)


class TestProgress:
    async def test_the_last_value_is_flushed_before_the_settle(self, parity: ParityEnv) -> None:
        """Rule: progress() is throttled and flushed before every settle."""
        while_running: list[float | None] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            await ctx.progress(0.25)
            await ctx.progress(0.75)  # within the throttle interval: kept, written at the settle
            while_running.append((await app.get_job(ctx.job_id)).progress)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert while_running == [0.25]
        assert (record.state, record.progress) == ("completed", 0.75)

    async def test_progress_is_flushed_before_a_failing_settle_too(self, parity: ParityEnv) -> None:
        """Rule: progress() is flushed before EVERY settle, a nack included."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=1))
        async def body(ctx: JobContext, input: Item) -> None:
            await ctx.progress(0.1)
            await ctx.progress(0.4)
            raise Boom("half way")

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert (record.state, record.progress) == ("dead", 0.4)

    async def test_progress_outside_zero_to_one_is_refused(self, parity: ParityEnv) -> None:
        """Rule: a numeric value that is not finite or out of range is refused with XJOBS_OPTION_INVALID."""
        refused: list[str] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            await ctx.progress(0.5)
            for bad in (1.5, -0.1, float("nan"), float("inf")):
                try:
                    await ctx.progress(bad)
                except XJobsError as exc:
                    refused.append(exc.code)

        app = parity.app(jobs=[body])
        async with app:
            result = await body.enqueue(Item())
            await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert refused == ["XJOBS_OPTION_INVALID"] * 4
        assert (record.state, record.progress) == ("completed", 0.5)


class TestOnSettled:
    async def test_called_once_for_a_completed_run_in_its_tenant_scope(
        self, parity: ParityEnv
    ) -> None:
        """Rule: on_settled runs after a settle that LANDED, in the run's tenant scope."""
        log = SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            result = await run_with_context(
                Actor(org_id="org-run", user_id="u-1"),
                lambda: body.enqueue(Item(org="org-run")),
            )
            await app.run_worker(until_idle=True)
        (event,) = log.events
        assert (event.job_id, event.run_id, event.name, event.queue) == (
            result.job_id,
            result.run_id,
            "body",
            QUEUE,
        )
        assert (event.outcome, event.attempt, event.tenant, event.error) == (
            "completed",
            1,
            "org-run",
            None,
        )
        assert log.actors == [Actor(org_id="org-run")]

    async def test_called_for_dead_lettered_and_dropped_but_never_a_retry(
        self, parity: ParityEnv
    ) -> None:
        """Rule: on_settled is the one ending hook — `completed`, `dead-lettered`, `dropped` — never for a retry."""
        log = SettledLog()
        retry_dead = Retry(attempts=2, base=timedelta(0), cap=timedelta(0), dead_letter=True)
        retry_drop = Retry(attempts=2, base=timedelta(0), cap=timedelta(0), dead_letter=False)

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry_dead)
        async def kept(ctx: JobContext, input: Item) -> None:
            raise Boom("kept")

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=retry_drop)
        async def dropped(ctx: JobContext, input: Item) -> None:
            raise Boom("dropped")

        app = parity.app(jobs=[kept, dropped], on_settled=log)
        async with app:
            dead = await kept.enqueue(Item(org="org-a"))
            failed = await dropped.enqueue(Item(org="org-b"))
            stats = await app.run_worker(until_idle=True)
        assert stats.retried == 2
        assert [e.outcome for e in log.for_job(dead.job_id)] == ["dead-lettered"]
        assert [e.outcome for e in log.for_job(failed.job_id)] == ["dropped"]
        assert sorted((e.tenant, e.attempt) for e in log.events) == [("org-a", 2), ("org-b", 2)]
        assert sorted((a.org_id or "") if a else "" for a in log.actors) == ["org-a", "org-b"]
        (error,) = [e.error for e in log.for_job(dead.job_id)]
        assert error is not None
        assert "Boom: kept" in error

    async def test_not_called_for_a_retry_that_later_completes(self, parity: ParityEnv) -> None:
        """Rule: on_settled is never called for a retry: a job that retries then completes ends once."""
        log = SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=NOW_RETRY)
        async def body(ctx: JobContext, input: Item) -> None:
            if not ctx.final_attempt:
                raise Boom("not yet")

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            await body.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert [(e.outcome, e.attempt) for e in log.events] == [("completed", 3)]

    async def test_a_job_hook_is_called_beside_the_app_hook(self, parity: ParityEnv) -> None:
        """Rule: job(on_settled=...) and App(on_settled=...) are both told of the ending."""
        app_log, job_log = SettledLog(), SettledLog()

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, on_settled=job_log)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body], on_settled=app_log)
        async with app:
            result = await body.enqueue(Item(org="org-3"))
            await app.run_worker(until_idle=True)
        assert [(e.job_id, e.outcome) for e in app_log.events] == [(result.job_id, "completed")]
        assert [(e.job_id, e.outcome) for e in job_log.events] == [(result.job_id, "completed")]
        assert job_log.actors == [Actor(org_id="org-3")]

    async def test_a_failing_hook_is_retried_a_bounded_number_of_times_and_never_fails_the_job(
        self, parity: ParityEnv
    ) -> None:
        """Rule: on_settled is retried a bounded number of times, never re-raised; the job's state stands."""
        calls: list[str] = []
        job_log = SettledLog()

        async def broken(event: object) -> None:
            calls.append("broken")
            raise RuntimeError("the audit log is down")

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, on_settled=job_log)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body], on_settled=broken)
        async with app:
            result = await body.enqueue(Item())
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert 1 < len(calls) <= 10
        assert record.state == "completed"
        assert stats.completed == 1
        assert job_log.outcomes() == ["completed"]

    async def test_a_hook_that_fails_once_is_retried_until_it_lands(
        self, parity: ParityEnv
    ) -> None:
        """Rule: on_settled is retried a bounded number of times: a transient failure still delivers."""
        calls: list[str] = []

        async def flaky(event: object) -> None:
            calls.append("call")
            if len(calls) == 1:
                raise RuntimeError("blip")

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body], on_settled=flaky)
        async with app:
            await body.enqueue(Item())
            await app.run_worker(until_idle=True)
        assert calls == ["call", "call"]

    async def test_called_for_a_job_the_claim_buried(self, parity: ParityEnv) -> None:
        """Rule: a lapsed lease on the final attempt is buried by the claim and the worker announces it (on_settled)."""
        log = SettledLog()
        ran: list[int] = []

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE, retry=Retry(attempts=1))
        async def body(ctx: JobContext, input: Item) -> None:
            ran.append(ctx.attempt)

        app = parity.app(jobs=[body], on_settled=log)
        async with app:
            result = await body.enqueue(Item(org="org-5"))
            await parity.claim_one(QUEUE, worker_id="crashed-worker", lease_ms=300)
            parity.clock.advance(301)
            stats = await app.run_worker(until_idle=True)
            record = await app.get_job(result.job_id)
        assert ran == []
        assert record.state == "dead"
        assert stats.buried == 1
        assert [(e.job_id, e.outcome, e.tenant) for e in log.events] == [
            (result.job_id, "dead-lettered", "org-5")
        ]
        assert log.actors == [Actor(org_id="org-5")]


class TestEnqueueMany:
    async def test_enqueue_many_is_one_round_trip_with_results_in_order(
        self, parity: ParityEnv
    ) -> None:
        """Rule: bulk enqueue is one round trip per batch; it answers one result per input, in order."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app, driver = counting_app(parity, [body])
        keys = [f"k-{n}" for n in range(5)]
        async with app:
            results = await body.enqueue_many([Item(key=k) for k in keys])
            records = [await app.get_job(r.job_id) for r in results]
        assert driver.enqueue_calls == [5]
        assert [r.idempotency_key for r in records] == keys
        assert len({r.job_id for r in results}) == 5
        assert not any(r.deduped for r in results)

    async def test_enqueue_many_dedupes_each_input_in_place(self, parity: ParityEnv) -> None:
        """Rule: within a batch, an input whose namespace is live answers the existing job (deduped), in its place."""

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def body(ctx: JobContext, input: Item) -> None:
            return None

        app = parity.app(jobs=[body])
        async with app:
            existing = await body.enqueue(Item(key="k-b"))
            results = await body.enqueue_many([Item(key="k-a"), Item(key="k-b"), Item(key="k-c")])
            stats = await app.run_worker(until_idle=True)
        assert [r.deduped for r in results] == [False, True, False]
        assert results[1].job_id == existing.job_id
        assert stats.completed == 3
