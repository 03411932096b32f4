"""May a claimed job start: its rate permits and the fleet slot its `concurrency` asks for — taken, deferred, shed, or refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from xjobs.contract.rates import InProcessRates, RateBucket, RateStore
from xjobs.contract.stores import SlotHolder, SlotStore
from xjobs.declare.job import JobHandle
from xjobs.declare.rate import ResolvedRate, global_scope, job_scope, queue_scope
from xjobs.errors import (
    ConcurrencyUnenforceableError,
    KeyUnderivableError,
    RateUnenforceableError,
    XJobsError,
)
from xjobs.run.local_rates import LocalRates
from xjobs.run.rate_batch import GrantBatch
from xjobs.run.rate_pool import PermitPool
from xjobs.run.record import RunRecord


@dataclass(frozen=True, slots=True)
class Admission:
    """The verdict for one claimed job: `start` (with the slot key held), `deferred` (over a rate:
    due in `wait_ms`), `shed`, `refuse`, or `undecidable` (a key could not be derived)."""

    verdict: Literal["start", "shed", "refuse", "undecidable", "deferred"]
    slot_key: str | None = None
    reason: str | None = None
    error: XJobsError | None = None
    wait_ms: int = 0


START: Final = Admission("start")


@dataclass(slots=True)
class RateGate:
    """The rates a worker enforces: each job's own, plus the worker's per queue and global ones."""

    store: RateStore | None
    local: LocalRates
    queues: Mapping[str, tuple[ResolvedRate, ...]] = field(default_factory=dict)
    shared: tuple[ResolvedRate, ...] = ()
    batch: GrantBatch | None = field(default=None, init=False, repr=False)
    pool: PermitPool | None = field(default=None, init=False, repr=False)
    # an in-process store (memory) has no round trip to save: asked directly, no mirror, no batch
    direct: InProcessRates | None = field(default=None, init=False, repr=False)
    # per job name, the buckets of a job whose every rate is unkeyed: the same for each of its runs
    unkeyed: dict[str, tuple[RateBucket, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        store = self.store
        if isinstance(store, InProcessRates):
            self.direct = store
        elif store is not None:
            self.batch = GrantBatch(store)
            self.pool = PermitPool(store, self.local)

    def buckets(self, handle: JobHandle[Any], value: Any) -> tuple[RateBucket, ...]:
        """Every bucket a run of `handle` with input `value` takes a permit of (a key may be underivable)."""
        name = handle.name
        known = self.unkeyed.get(name)
        if known is not None:
            return known
        queued = self.queues.get(handle.queue, ())
        found = [r.bucket(job_scope(name, i), value, job=name) for i, r in enumerate(handle.rates)]
        found.extend(
            r.bucket(queue_scope(handle.queue, i), value, job=name) for i, r in enumerate(queued)
        )
        found.extend(r.bucket(global_scope(i), value, job=name) for i, r in enumerate(self.shared))
        buckets = tuple(found)
        if all(r.key is None for r in (*handle.rates, *queued, *self.shared)):
            self.unkeyed[name] = buckets
        return buckets

    def held_ahead(self, handle: JobHandle[Any]) -> bool:
        """Whether the runs of `handle` start on permits held ahead: its grant is one unkeyed tuple."""
        return handle.name in self.unkeyed

    async def take(self, buckets: tuple[RateBucket, ...], *, ahead: bool = False) -> int:
        """Take a permit of every bucket: 0 when taken, else ms until they are free. An unkeyed
        grant (`ahead`) starts on a permit this process holds ahead (`PermitPool`) when it can;
        the other takes of one event-loop turn reach the store together, as one call (`GrantBatch`)."""
        if not buckets:
            return 0
        if self.direct is not None:
            verdict = self.direct.grant_now(buckets)
            return 0 if verdict.granted else max(verdict.wait_ms, 1)
        batch, pool = self.batch, self.pool
        if batch is None or pool is None:  # no rate store
            return 0
        if ahead and pool.take(buckets):
            return 0
        wait = self.local.wait_ms(buckets)
        if wait:
            return wait
        if ahead and await pool.refill(buckets):
            return 0
        verdict = await batch.acquire(buckets)
        if not verdict.granted:
            return max(verdict.wait_ms, 1)
        self.local.took(buckets)
        return 0

    async def close(self) -> None:
        """The worker is closing: no reservation of the pool is left in flight."""
        if self.pool is not None:
            await self.pool.close()

    async def abandon(self, buckets: tuple[RateBucket, ...]) -> None:
        """Hand back the permits taken for a run that never started."""
        if buckets and self.store is not None:
            self.local.gave_back(buckets)
            await self.store.abandon(buckets)


def assert_enforceable(
    handles: list[JobHandle[Any]], slots: SlotStore | None, gate: RateGate | None = None
) -> None:
    """A declared `concurrency` needs a fleet slot store, a declared rate a rate store; without one
    the worker refuses to start."""
    declared = sorted(h.name for h in handles if h.concurrency is not None)
    if declared and slots is None:
        raise ConcurrencyUnenforceableError(
            f"jobs {declared} declare concurrency, but this backend has no slot store to enforce it"
        )
    if gate is None or gate.store is not None:
        return
    rated = sorted(h.name for h in handles if h.rates)
    if rated or gate.queues or gate.shared:
        raise RateUnenforceableError(
            f"rate limits are declared (jobs {rated}, or the worker's), but this backend has no rate store"
        )


async def admit(
    run: RunRecord, slots: SlotStore | None, ttl_ms: int, gate: RateGate | None = None
) -> Admission:
    """Take the run's rate permits, then its fleet slot; over a rate defers, a busy key sheds
    (`wait`) or, on evidence of another holder, refuses (`fail`). Permits taken for a run that then
    does not start are abandoned here."""
    handle, job = run.handle, run.job
    assert handle is not None
    if run.refusal is not None:
        return START
    concurrency = handle.concurrency if slots is not None else None
    try:
        buckets = gate.buckets(handle, run.value) if gate is not None else ()
        key = None if concurrency is None else concurrency.lease_key(handle.name, run.value)
    except XJobsError as exc:  # terminal: every attempt derives the same; the round goes on
        return Admission("undecidable", error=KeyUnderivableError(exc.message, terminal=True))
    if gate is not None and buckets:
        wait = await gate.take(buckets, ahead=gate.held_ahead(handle))
        if wait:
            return Admission("deferred", reason="over its rate", wait_ms=wait)
    if key is None or concurrency is None or slots is None:
        return START
    try:
        admission = await _slot(
            slots,
            key,
            SlotHolder(job.id, job.claims),
            concurrency.limit,
            ttl_ms,
            concurrency.when_busy,
        )
    except Exception:
        if gate is not None:
            await gate.abandon(buckets)
        raise
    if admission.verdict != "start" and gate is not None:
        await gate.abandon(buckets)
        return admission
    return Admission("start", slot_key=key)


async def _slot(
    slots: SlotStore, key: str, holder: SlotHolder, limit: int, ttl_ms: int, when_busy: str | None
) -> Admission:
    """Take a slot of `key`; busy, it sheds or (`fail`, with another holder in evidence) refuses."""
    if await slots.acquire(key, holder, limit, ttl_ms):
        return Admission("start", slot_key=key)
    if when_busy == "fail":
        others = [h for h in await slots.holders(key) if h.job_id != holder.job_id]
        if others:
            return Admission(
                "refuse", reason=f"concurrency key {key!r} is held by job {others[0].job_id}"
            )
    return Admission("shed", reason=f"concurrency key {key!r} is busy")
