"""May a claimed job start: the fleet slot its `concurrency` asks for — taken, shed, or refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from xjobs.contract.stores import SlotHolder, SlotStore
from xjobs.declare.job import JobHandle
from xjobs.errors import ConcurrencyUnenforceableError, XJobsError
from xjobs.run.record import RunRecord


@dataclass(frozen=True, slots=True)
class Admission:
    """The verdict for one claimed job: `start` (with the slot key held, if any), `shed`, or `refuse`."""

    verdict: Literal["start", "shed", "refuse", "undecidable"]
    slot_key: str | None = None
    reason: str | None = None
    error: XJobsError | None = None


def assert_enforceable(handles: list[JobHandle[Any]], slots: SlotStore | None) -> None:
    """A declared `concurrency` needs a fleet slot store; without one the worker refuses to start."""
    if slots is not None:
        return
    declared = sorted(h.name for h in handles if h.concurrency is not None)
    if declared:
        raise ConcurrencyUnenforceableError(
            f"jobs {declared} declare concurrency, but this backend has no slot store to enforce it"
        )


async def admit(run: RunRecord, slots: SlotStore | None, ttl_ms: int) -> Admission:
    """Take the run's fleet slot; a busy key sheds (`wait`) or, on evidence of another holder, refuses (`fail`)."""
    handle, job = run.handle, run.job
    assert handle is not None
    concurrency = handle.concurrency
    if concurrency is None or slots is None or run.refusal is not None:
        return Admission("start")
    try:
        key = concurrency.lease_key(handle.name, run.value)
    except XJobsError as exc:  # the attempt fails with this error; the round goes on
        return Admission("undecidable", error=exc)
    holder = SlotHolder(job.id, job.claims)
    if await slots.acquire(key, holder, concurrency.limit, ttl_ms):
        return Admission("start", slot_key=key)
    if concurrency.when_busy == "fail":
        others = [h for h in await slots.holders(key) if h.job_id != job.id]
        if others:
            return Admission(
                "refuse", reason=f"concurrency key {key!r} is held by job {others[0].job_id}"
            )
    return Admission("shed", reason=f"concurrency key {key!r} is busy")
