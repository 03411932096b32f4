"""Parity: a step finished during the drain is recorded once and replayed by the next run
(semantics.md, "Execution": a fenced write on a live attempt during the drain; "The worker")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from xjobs import JobContext, job
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import QUEUE, Item, key_of, org_of, within

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("steps")]

MARGIN = timedelta(milliseconds=50)


class TestStepInTheDrain:
    async def test_a_step_finished_before_the_cut_off_is_recorded_once_and_replayed(
        self, parity: ParityEnv
    ) -> None:
        """Rule: stop_accepting aborts nothing, so a step in flight finishes and is recorded; the run
        interrupted at the cut-off replays it on the next worker and never calls it again."""
        calls: list[str] = []
        gate = asyncio.Event()
        charging, charged = asyncio.Event(), asyncio.Event()
        first_run = True
        receipts: list[str] = []

        async def charge() -> str:
            calls.append("charge")
            charging.set()
            await gate.wait()
            return "receipt-1"

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            receipt = await ctx.step.run("charge", charge)
            charged.set()
            if first_run:
                await asyncio.Event().wait()  # held until the drain's cut-off interrupts it
            receipts.append(receipt)

        app = parity.app(jobs=[flow])
        async with app:
            result = await flow.enqueue(Item())
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(charging.wait(), what="the step to start")
            worker.stop_accepting(drain_timeout_ms=1_000)
            gate.set()  # the step finishes inside the drain
            await within(charged.wait(), what="the step to be recorded")
            worker.interrupt()  # the cut-off, now
            await within(worker.close(), what="the drain")
            interrupted = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
            first_run = False
            stats = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
            after = await app.get_steps(result.job_id)
        assert (interrupted.state, interrupted.attempt) == ("ready", 0)
        assert [(s.name, s.status) for s in steps] == [("charge", "done")]
        assert calls == ["charge"]
        assert stats.completed == 1
        assert (done.state, receipts) == ("completed", ["receipt-1"])
        assert [(s.name, s.status, s.result) for s in after] == [("charge", "done", '"receipt-1"')]

    async def test_a_step_the_body_finishes_after_the_cut_off_is_recorded_once(
        self, parity: ParityEnv
    ) -> None:
        """Rule: after the cut-off (XJOBS_DRAINING) a fenced step write on the live attempt still
        lands; the next run replays that step and never calls it again."""
        calls: list[str] = []
        started = asyncio.Event()
        first_run = True

        def save() -> str:
            calls.append("save")
            return "saved"

        @job(tenant=org_of, idempotency_key=key_of, queue=QUEUE)
        async def flow(ctx: JobContext, input: Item) -> None:
            if first_run:
                started.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    await ctx.step.run("save", save)  # a checkpoint on the way out
                    raise
            await ctx.step.run("save", save)

        app = parity.app(jobs=[flow])
        async with app:
            result = await flow.enqueue(Item())
            worker = app.worker(drain_margin=MARGIN)
            await worker.start()
            await within(started.wait(), what="the body to start")
            worker.stop_accepting(drain_timeout_ms=1_000)
            worker.interrupt()
            await within(worker.close(), what="the drain")
            interrupted = await app.get_job(result.job_id)
            steps = await app.get_steps(result.job_id)
            first_run = False
            stats = await app.run_worker(until_idle=True)
            done = await app.get_job(result.job_id)
        assert (interrupted.state, interrupted.attempt) == ("ready", 0)
        assert interrupted.last_error is not None
        assert "XJOBS_DRAINING" in interrupted.last_error
        assert [(s.name, s.status, s.result) for s in steps] == [("save", "done", '"saved"')]
        assert calls == ["save"]
        assert (stats.completed, done.state) == (1, "completed")
