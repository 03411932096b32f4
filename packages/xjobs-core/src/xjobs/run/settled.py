"""The `on_settled` hook: the one ending hook, run after a settle that landed, never re-raised."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from xjobs.actor import Actor, run_with_context
from xjobs.contract.driver import Outcome

log = logging.getLogger("xjobs.run.settled")

ON_SETTLED_ATTEMPTS = 3
ON_SETTLED_BACKOFF_S = 0.05
ENDING_OUTCOMES: frozenset[str] = frozenset({"completed", "dead-lettered", "dropped", "refused"})


@dataclass(frozen=True, slots=True)
class Settled:
    """What `on_settled` is told: which job ended, how, and with what error."""

    job_id: str
    run_id: str
    name: str
    queue: str
    outcome: Outcome
    attempt: int
    tenant: str | None
    error: str | None


SettledHook = Callable[[Settled], Awaitable[None]]


async def announce_settled(hooks: tuple[SettledHook, ...], event: Settled) -> None:
    """Run each hook for an ending outcome in the run's tenant scope, retried a few times, never raising."""
    if event.outcome not in ENDING_OUTCOMES:
        return
    actor = Actor(org_id=event.tenant)
    for hook in hooks:
        for attempt in range(1, ON_SETTLED_ATTEMPTS + 1):
            try:
                await run_with_context(actor, functools.partial(hook, event))
                break
            except asyncio.CancelledError:
                raise
            except Exception:
                if attempt == ON_SETTLED_ATTEMPTS:
                    log.exception(
                        "jobs.settled.failed",
                        extra={"job_id": event.job_id, "job": event.name, "outcome": event.outcome},
                    )
                else:
                    await asyncio.sleep(ON_SETTLED_BACKOFF_S * attempt)
