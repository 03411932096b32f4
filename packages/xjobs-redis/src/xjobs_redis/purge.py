"""The Redis `RetentionStore`: a finished job's keys expire from its settle; the purge trims what they leave and the other stores."""

from __future__ import annotations

import json

from xjobs.contract.driver import FINISHED_STATES
from xjobs.contract.retention import COUNTER_TIERS, RETAINED_STATES, Keep, PurgeCut, PurgeStore
from xjobs.contract.stores import EventBus
from xjobs_redis.calls import purge as calls
from xjobs_redis.endings import ChildEndings
from xjobs_redis.executor import Command, Executor
from xjobs_redis.keys import Keys, job_id_of
from xjobs_redis.locate import queues
from xjobs_redis.rows import stored_names

DRY_BATCH = 1_000  # index members a dry run reads at a time


class Expiry:
    """The policy as the settling scripts take it (lib's `expire_finished`): JSON, '' while off.

    One per backend, shared by every store that settles a job (the driver, the claim pass, the
    results, the operator's cancel), and set by `RedisRetention.keep`.
    """

    __slots__ = ("json",)

    def __init__(self) -> None:
        self.json = ""

    def adopt(self, policy: Keep | None) -> None:
        """Encode `policy` once: `{"s": {state: ms}, "n": {job name: ms}}`."""
        if policy is None:
            self.json = ""
            return
        states = {s: policy.retention.kept_ms[s] for s in RETAINED_STATES if s in FINISHED_STATES}
        self.json = json.dumps({"s": states, "n": dict(policy.per_job_ms)}, sort_keys=True)


class RedisRetention:
    """Purges in scripts of one queue (one slot) each; a batch looks at `limit` members at most."""

    def __init__(
        self,
        executor: Executor,
        keys: Keys,
        events: EventBus,
        expiry: Expiry,
        endings: ChildEndings | None = None,
    ) -> None:
        self._x = executor
        self._k = keys
        self._events = events
        self.expiry = expiry
        self._endings = endings or ChildEndings(executor, keys)

    def keep(self, policy: Keep | None) -> None:
        self.expiry.adopt(policy)

    async def purge(self, store: PurgeStore, cut: PurgeCut, limit: int) -> int:
        return await self._run(store, cut, limit, dry=False)

    async def expired(self, store: PurgeStore, cut: PurgeCut) -> int:
        return await self._run(store, cut, None, dry=True)

    async def _run(self, store: PurgeStore, cut: PurgeCut, limit: int | None, *, dry: bool) -> int:
        if store == "jobs":
            if not dry:  # the sweep: endings a killed process left between their steps
                await self._endings.sweep()
            return await self._jobs(cut, limit, dry=dry)
        if store == "counters":
            return await self._counters(cut, limit, dry=dry)
        if store == "workers":
            call = calls.purge_workers(self._k, cutoff_ms=cut.workers, limit=limit or 0, dry=dry)
            return int(await self._x.run(call))
        if store == "events":
            if dry:
                return await self._events_due(cut.events)
            return await self._events.purge_expired(cut.events)
        return 0  # no outbox on Redis

    async def _events_due(self, cutoff_ms: int) -> int:
        """The events' dry run: the events sent before the cut-off (the events' slot), and each
        queue's waits whose deadline fell before it (a ZCOUNT per queue, pipelined)."""
        count = int(await self._x.run(calls.purge_events_count(self._k, cutoff_ms=cutoff_ms)))
        names = await queues(self._x, self._k)
        return count + sum(
            int(n) for n in await self._x.batch([_lapsed(self._k, q, cutoff_ms) for q in names])
        )

    async def _jobs(self, cut: PurgeCut, limit: int | None, *, dry: bool) -> int:
        """Queue by queue, state by state: read a batch of the state's index (oldest created first,
        up to the latest cut-off), then purge the ones past their cut-off in one script."""
        purged = 0
        for queue in await queues(self._x, self._k):
            for state in sorted(cut.jobs):
                purged += await self._state(queue, state, cut, limit, purged, dry=dry)
                if limit is not None and purged >= limit:
                    return purged
        return purged

    async def _state(
        self, queue: str, state: str, cut: PurgeCut, limit: int | None, done: int, *, dry: bool
    ) -> int:
        index = self._k.finished(queue, state)
        upto = max([cut.jobs[state], *cut.job_names.values()])
        purged, skip = 0, 0
        while limit is None or done + purged < limit:
            size = DRY_BATCH if limit is None else limit - done - purged
            (members,) = await self._x.batch([_oldest(index, upto, skip, size)])
            if not members:
                break
            due = await self._due(state, cut, [str(m) for m in members])
            if dry:
                purged, skip = purged + len(due), skip + len(members)
            else:
                call = calls.purge_jobs(
                    self._k,
                    queue=queue,
                    state=state,
                    cutoff_ms=cut.jobs[state],
                    names=cut.job_names,
                    jobs=due,
                )
                gone = int(await self._x.run(call)) if due else 0
                await self._endings.forget([(queue, job_id, run) for job_id, run in due if run])
                purged, skip = purged + gone, skip + len(members) - gone
            if len(members) < size:
                break
        return purged

    async def _due(
        self, state: str, cut: PurgeCut, members: list[str]
    ) -> list[tuple[str, str | None]]:
        """Which members are past their cut-off, as (id, run id) (`None`: the HASH expired)."""
        rows = await self._x.batch([_fields(m) for m in members])
        held = await self._endings.held([str(row[-1]) for row in rows if row[-1] is not None])
        due: list[tuple[str, str | None]] = []
        for member, (found, short_name, name, finished, short_run, run_id, link) in zip(
            members, rows, strict=True
        ):
            if link is not None and str(link) in held:
                continue  # a finished child of a live parent: its parent reads its result later
            name, run_id = short_name or name, short_run or run_id  # a short field, else its twin
            if found is None:
                due.append((job_id_of(member), None))
                continue
            cutoff = cut.job_cutoff(str(name), state)
            if found == state and cutoff is not None and int(finished or 0) < cutoff:
                due.append((job_id_of(member), str(run_id)))
        return due

    async def _counters(self, cut: PurgeCut, limit: int | None, *, dry: bool) -> int:
        purged = 0
        for queue in await queues(self._x, self._k):
            for tier in COUNTER_TIERS:
                if limit is not None and purged >= limit:
                    return purged
                size = 0 if limit is None else limit - purged
                call = calls.purge_counters(
                    self._k,
                    queue=queue,
                    tier=tier,
                    cutoff_ms=cut.counters[tier],
                    limit=size,
                    dry=dry,
                )
                purged += int(await self._x.run(call))
        return purged


def _oldest(index: str, upto_ms: int, skip: int, size: int) -> Command:
    """A finished index's members created before `upto_ms`, oldest first, past the first `skip`."""
    return lambda pipe: pipe.zrangebyscore(index, "-inf", f"({upto_ms}", start=skip, num=size)


def _fields(job: str) -> Command:
    fields = ("state", *stored_names("name"), "finished_at_ms", *stored_names("run_id"), "link")
    return lambda pipe: pipe.hmget(job, fields)


def _lapsed(keys: Keys, queue: str, cutoff_ms: int) -> Command:
    """The count of `queue`'s waits whose deadline fell before `cutoff_ms`."""
    deadlines = keys.event_deadlines(queue)
    return lambda pipe: pipe.zcount(deadlines, "-inf", f"({cutoff_ms}")
