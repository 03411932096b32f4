"""`xjobs_fan_ins_total`: each fan-in a parent resolves is counted once by its job and outcome —
`completed` when every child's result was read, `failed` when a child failed it fast."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

import xjobs
from xjobs import JobContext, Retry, job


class Kid(BaseModel):
    n: int


class Parent(BaseModel):
    key: str
    fail: bool = False


@job(tenant="none", idempotency_key=lambda k: str(k.n), queue="kids", retry=Retry(attempts=1))
async def kid(ctx: JobContext, input: Kid) -> int:
    if input.n < 0:
        raise RuntimeError("a child that fails")
    return input.n


@job(tenant="none", idempotency_key=lambda p: p.key, retry=Retry(attempts=1))
async def parent(ctx: JobContext, input: Parent) -> None:
    await ctx.step.map("kids", kid, [Kid(n=-1 if input.fail else 1), Kid(n=2)])


def fan_ins(body: bytes) -> dict[tuple[str, str], float]:
    return {
        (s.labels["job"], s.labels["outcome"]): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "xjobs_fan_ins_total"
    }


@pytest.mark.asyncio
async def test_each_resolved_fan_in_is_counted_once_by_outcome() -> None:
    async with xjobs.App("memory://", jobs=[parent, kid], retention=None) as app:
        metrics = app.telemetry.enable_metrics(backend_gauges="never")
        ok = await parent.enqueue(Parent(key="ok"))
        bad = await parent.enqueue(Parent(key="bad", fail=True))
        for _ in range(4):  # the parents park, the children run, the parents continue
            await app.run_worker(queues=["default", "kids"], until_idle=True)
        states = [(await app.get_job(r.job_id)).state for r in (ok, bad)]
        body, _ = metrics.exposition()
    assert states == ["completed", "dead"]
    assert fan_ins(body) == {("parent", "completed"): 1.0, ("parent", "failed"): 1.0}
