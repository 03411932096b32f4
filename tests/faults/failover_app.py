"""The failover scenarios' app: a job of two durable steps, each step's return and every landed
ending settle written to the effects file (`fault_app.record`), as worker processes run it."""

from __future__ import annotations

from pydantic import BaseModel

import xjobs

try:
    from .fault_app import FAST_RETRY, QUEUE, URL, FaultApp, record
except ImportError:  # a worker process imports this file as the top-level `failover_app`
    from fault_app import FAST_RETRY, QUEUE, URL, FaultApp, record  # type: ignore[no-redef, import-not-found]


class Paced(BaseModel):
    """One job of the producer's stream."""

    key: str


def _step(name: str, job_id: str, key: str, attempt: int) -> str:
    record("step", job_id, key, attempt, step=name)
    return f"{name}-done"


@xjobs.job(tenant="none", idempotency_key=lambda p: p.key, queue=QUEUE, retry=FAST_RETRY)
async def paced(ctx: xjobs.JobContext, p: Paced) -> None:
    """Two recorded steps, then the effect; `step-held` once a step's result came back stored."""
    record("start", ctx.job_id, p.key, ctx.attempt)
    for name in ("one", "two"):
        await ctx.step.run(name, _step, name, ctx.job_id, p.key, ctx.attempt)
        record("step-held", ctx.job_id, p.key, ctx.attempt, step=name)
    record("effect", ctx.job_id, p.key, ctx.attempt)


async def settled(event: xjobs.Settled) -> None:
    """An ending settle landed (`on_settled` runs only then)."""
    record("settled", event.job_id, "", event.attempt, outcome=event.outcome)


app = FaultApp(URL, jobs=[paced], on_settled=settled, retention=None)
