"""Jobs in `(created_at, id)` order across indexes and queues: the list's pages and the bulk verbs'
selections.

A source is one index of one queue. A live job is found in one of three: a job enqueued due now
at priority 0 waits in `ready` in creation order already (its score is its run_at, which is its
created_at; ties by id), so the `ready` source walks that band and keeps those jobs; every other
ready or waiting job is in `created` (by creation); a running job is in `leased` (read whole, up
to `LEASED_BOUND` entries a queue, and ordered by the script). A finished job is in its state's
ZSET (by creation). A job found in two (a retry due at its own created_at) is listed once. A
step of a source is one `walk.lua` call:
it enters the index by rank, examines at most `WALK_BUDGET` entries and answers the matches with
the last entry it examined, where the next step resumes; the steps of every source that needs one
ride one pipelined round trip. The merge takes the head of a source only when every other source
has a head or is exhausted, so the order is exact however the sources interleave.

What it costs: a page reads each source from its position on, so it does not grow with the jobs
stored. A filter the index does not serve (a job name, a tenant, one live state out of the live
index) passes over the jobs that do not match, `WALK_BUDGET` per step and call; a selective one
costs as many steps as the jobs it passes over.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from xjobs.contract.driver import FINISHED_STATES, LIVE_STATES
from xjobs.contract.introspection import COUNT_CAP, JobFilter, JobPosition
from xjobs_redis.calls import operator as calls
from xjobs_redis.calls.operator import WalkFilter
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys, job_id_of

WALK_BUDGET = 1000  # index entries one walk.lua call examines at most
LEASED_BOUND = COUNT_CAP  # running jobs of one queue a running-only walk reads
STEP_ROWS = 1000  # matches one step answers at most
PRIORITY_SPAN = 2**42  # the ready score's priority band (lib.lua's PRIORITY_SPAN)
FINISHED_ORDER = tuple(sorted(FINISHED_STATES))


@dataclass(frozen=True, slots=True)
class Row:
    """One walked job: its position and the fields the walk asked for (after the position's)."""

    created_at_ms: int
    id: str
    queue: str
    fields: Sequence[Any]

    @property
    def key(self) -> tuple[int, str]:
        return (self.created_at_ms, self.id)


@dataclass
class Source:
    """One index of one queue, with what its steps found and where the next one resumes."""

    queue: str
    index: str
    where: WalkFilter
    position: tuple[int, str] | None = None
    exhausted: bool = False
    buffer: deque[Row] = field(default_factory=deque)


def sources(
    queues: Sequence[str],
    where: JobFilter,
    states: Sequence[str],
    *,
    run_after_ms: int | None = None,
    free: bool = False,
) -> list[Source]:
    """The sources that hold the jobs of `states` matching `where`, in every one of `queues`."""
    queued = tuple(s for s in ("ready", "waiting") if s in states)
    finished = [s for s in FINISHED_ORDER if s in states]

    def filtered(states: tuple[str, ...]) -> WalkFilter:
        return WalkFilter(
            states=states,
            name=where.name,
            tenant=where.tenant,
            after_ms=where.created_after_ms,
            before_ms=where.created_before_ms,
            run_after_ms=run_after_ms,
            free=free,
        )

    found: list[Source] = []
    for queue in queues:
        if queued:
            found.append(Source(queue, "created", filtered(queued)))
        # A job as enqueued is due, so a selection of future run_ats (a promote) skips `ready`.
        if "ready" in states and run_after_ms is None:
            found.append(Source(queue, "ready", _enqueued(filtered(("ready",)))))
        if "running" in states:
            found.append(Source(queue, "leased", filtered(("running",))))
        found += [Source(queue, state, filtered((state,))) for state in finished]
    return found


def _enqueued(where: WalkFilter) -> WalkFilter:
    """The ready source's filter: jobs as enqueued (run_at is created_at), in the priority-0 band
    (scores 0 to 2^42), whose scores are their created_at."""
    after = -1 if where.after_ms is None else max(where.after_ms, -1)
    before = PRIORITY_SPAN if where.before_ms is None else min(where.before_ms, PRIORITY_SPAN)
    return replace(where, after_ms=after, before_ms=before, enqueued=True)


def all_states(where: JobFilter) -> tuple[str, ...]:
    """The states a list reads: the filter's, or every one."""
    return where.states or (*LIVE_STATES, *FINISHED_STATES)


class Walk:
    """A merged walk over `sources`, newest or oldest first, strictly past `start`."""

    def __init__(
        self,
        executor: Executor,
        keys: Keys,
        found: list[Source],
        *,
        newest: bool,
        fields: Sequence[str] = (),
        start: JobPosition | None = None,
    ) -> None:
        self._x = executor
        self._k = keys
        self._sources = found
        self._newest = newest
        self._fields = ("created_at_ms", "id", *fields)
        self._seen: set[str] = set()
        self.examined = 0
        for source in found:
            source.position = None if start is None else (start.created_at_ms, start.id)
            source.exhausted = False
            source.buffer.clear()

    async def take(self, n: int, *, max_examined: int | None = None) -> list[Row]:
        """The next `n` jobs in order (fewer at the end, or once `max_examined` index entries
        were examined by this walk)."""
        out: list[Row] = []
        while len(out) < n:
            if max_examined is not None and self.examined >= max_examined:
                break
            hungry = [s for s in self._sources if not s.buffer and not s.exhausted]
            if hungry:
                await self._step(hungry, n - len(out))
                continue
            heads = [s for s in self._sources if s.buffer]
            if not heads:
                break
            pick = max if self._newest else min
            best = pick(heads, key=lambda s: s.buffer[0].key)
            row = best.buffer.popleft()
            if row.id not in self._seen:  # a job that moved index between two steps
                self._seen.add(row.id)
                out.append(row)
        return out

    async def _step(self, hungry: list[Source], want: int) -> None:
        batch = [
            calls.walk(
                self._k,
                queue=s.queue,
                index=s.index,
                newest=self._newest,
                position=s.position,
                where=s.where,
                want=min(max(want, 1), STEP_ROWS),
                budget=LEASED_BOUND if s.index == "leased" else WALK_BUDGET,
                fields=self._fields,
            )
            for s in hungry
        ]
        for source, reply in zip(hungry, await self._x.batch(batch), strict=True):
            rows, last_score, last_member, exhausted, examined = reply
            for fields in rows:
                source.buffer.append(Row(int(fields[0]), str(fields[1]), source.queue, fields[2:]))
            if last_member:
                source.position = (int(last_score), job_id_of(str(last_member)))
            source.exhausted = int(exhausted) == 1
            self.examined += int(examined)
