"""The Postgres `RetentionStore`: the statements of `sql/purge.sql`, one bounded batch a statement."""

from __future__ import annotations

from dataclasses import dataclass

from xjobs.contract.retention import (
    COUNTER_TIERS,
    DEFAULT_PURGE_BATCH,
    MAX_BATCHES_PER_PASS,
    Keep,
    PurgeCut,
    PurgeStore,
)
from xjobs_pg.executor import Executor
from xjobs_pg.params import Bound

# How many of a purge statement's parameters its dry run (`<statement>_count`) takes: all but the batch.
PURGE_COUNT_ARITY = {"jobs": 4, "events": 1, "outbox": 1, "workers": 1, "counters": 3}


@dataclass(frozen=True, slots=True)
class PurgeParams:
    """One purge statement's parameters, in `$n` order (the layouts are in `sql/purge.sql`)."""

    values: Bound

    def bind(self) -> Bound:
        return self.values

    @classmethod
    def of(cls, store: PurgeStore, cut: PurgeCut, limit: int | None) -> PurgeParams:
        """`purge_jobs`: states, their cut-offs, names, their cut-offs, the batch; `purge_counters`:
        tiers, their cut-offs, the batch, the minute cut-off; the others: the cut-off, the batch."""
        if store == "jobs":
            states, names = sorted(cut.jobs.items()), sorted(cut.job_names.items())
            return cls(
                (
                    [s for s, _ in states],
                    [c for _, c in states],
                    [n for n, _ in names],
                    [c for _, c in names],
                    limit,
                )
            )
        if store == "counters":
            tiers = list(COUNTER_TIERS)
            cutoffs = [cut.counters[t] for t in tiers]
            return cls((tiers, cutoffs, limit, cut.counters["minute"]))
        before = {"events": cut.events, "outbox": cut.outbox, "workers": cut.workers}[store]
        return cls((before, limit))

    def first(self, n: int) -> PurgeParams:
        """The first `n` parameters (a dry run's)."""
        return PurgeParams(self.values[:n])


async def purge_events_before(executor: Executor, before_ms: int) -> int:
    """The event bus's `purge_expired`: `purge_events` batches until a short one, so the bus's
    purge and the retention pass run the one bounded statement (never one unbounded delete)."""
    total = 0
    for _ in range(MAX_BATCHES_PER_PASS):
        row = await executor.fetchrow("purge_events", PurgeParams((before_ms, DEFAULT_PURGE_BATCH)))
        assert row is not None
        gone = int(row["purged"])
        total += gone
        if gone < DEFAULT_PURGE_BATCH:
            break
    return total


class PostgresRetention:
    """Deletes only when the purge asks (a finished row carries no expiry here)."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    def keep(self, policy: Keep | None) -> None:
        """Nothing to adopt: each purge's cut carries the policy."""

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        row = await self._x.fetchrow(f"purge_{store}", PurgeParams.of(store, cut, limit))
        assert row is not None
        return int(row["purged"])

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        params = PurgeParams.of(store, cut, None).first(PURGE_COUNT_ARITY[store])
        row = await self._x.fetchrow(f"purge_{store}_count", params)
        assert row is not None
        return int(row["purged"])
