"""The app `xjobs migrate`'s tests move between backends: steps, results, a wait, a failure."""

from __future__ import annotations

from pydantic import BaseModel

import xjobs

# Each step body's calls, by job key: a step copied with its job is replayed, never run again.
CALLS: list[str] = []


class Item(BaseModel):
    key: str


def _call(key: str) -> str:
    CALLS.append(key)
    return f"a-{key}"


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key)
async def stepped(ctx: xjobs.JobContext, input: Item) -> dict[str, str]:
    """One step, then a result."""
    first = await ctx.step.run("a", _call, input.key)
    return {"key": input.key, "first": first}


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key)
async def waiter(ctx: xjobs.JobContext, input: Item) -> dict[str, object]:
    """One step, then a wait for the `go` event."""
    await ctx.step.run("a", _call, input.key)
    payload = await ctx.step.wait_for_event("go", "go")
    return {"key": input.key, "go": payload}


@xjobs.job(tenant="none", idempotency_key=lambda i: i.key)
async def declined(ctx: xjobs.JobContext, input: Item) -> None:
    """Dead at once."""
    raise xjobs.Terminal(f"declined {input.key}")


def build(url: str) -> xjobs.App:
    """The app on `url`."""
    return xjobs.App(url, jobs=[stepped, waiter, declined], retention=None)
