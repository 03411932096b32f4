"""`RedisIntrospection`: the operator contract over the Redis keys (lists, counts, counters, pauses,
promote, remove and the bulk verbs).

Every script runs on one queue's slot; a verb over several queues loops over them in Python,
pipelining one call per queue. A bulk verb selects its jobs oldest first across every queue it
reads (`walk`), then moves them with one script per queue that checks each job again (a job that
moved meanwhile is skipped and not counted); `remaining` is counted by walking on, at most
`COUNT_CAP` jobs (or `REMAINING_SCAN` index entries): at the cap it reads "at least this many".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from xjobs.clock import Clock
from xjobs.contract.driver import FINISHED_STATES, LIVE_STATES, BulkResult, JobMove
from xjobs.contract.introspection import (
    COUNT_CAP,
    AttemptError,
    CounterBucket,
    CounterTier,
    JobFilter,
    JobPosition,
    JobSummary,
    Pause,
    PauseKind,
    QueueCounts,
    only_states,
)
from xjobs_redis.calls import events as event_calls
from xjobs_redis.calls import jobs as job_calls
from xjobs_redis.calls import operator as calls
from xjobs_redis.counters import read_counters, roll_up
from xjobs_redis.endings import ChildEndings
from xjobs_redis.executor import Call, Command, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import locate, queues
from xjobs_redis.pauses import Pauses
from xjobs_redis.rows import (
    SUMMARY_FIELDS,
    attempt_errors,
    first_present,
    job_move,
    job_summary,
    stored_names,
)
from xjobs_redis.walk import Row, Walk, all_states, sources

# The most entries the oldest-ready search of a queue's counts looks at.
OLDEST_BOUND = 1000
# The most index entries a bulk verb's count of `remaining` examines.
REMAINING_SCAN = 10 * COUNT_CAP
NAMESPACE_FIELDS = ("name", "tenant_id", "idempotency_key")


class RedisIntrospection:
    """`JobIntrospection` over one Redis backend's keys."""

    def __init__(
        self, executor: Executor, keys: Keys, clock: Clock, endings: ChildEndings | None = None
    ) -> None:
        self._x = executor
        self._k = keys
        self._clock = clock
        self._endings = endings or ChildEndings(executor, keys)
        self._pauses = Pauses(executor, keys, clock)

    async def _queues(self, where: JobFilter | None = None) -> list[str]:
        if where is not None and where.queue is not None:
            return [where.queue]
        return await queues(self._x, self._k)

    # -- read -------------------------------------------------------------------------------------

    async def list_jobs(
        self, where: JobFilter, *, limit: int, after: JobPosition | None
    ) -> list[JobSummary]:
        found = sources(await self._queues(where), where, all_states(where))
        walk = Walk(self._x, self._k, found, newest=True, fields=SUMMARY_FIELDS, start=after)
        return [job_summary(row.fields) for row in await walk.take(limit)]

    async def errors(self, job_id: str) -> list[AttemptError]:
        names = await self._queues()
        batch = [_hget(self._k.errors(q), job_id) for q in names]
        for history in await self._x.batch(batch):
            if history:
                return attempt_errors(job_id, str(history))
        return []

    async def queues(self, now_ms: int) -> list[QueueCounts]:
        paused = set(await self._pauses.paused_queues())
        names = sorted(set(await self._queues()) | paused)
        batch = [
            calls.queue_counts(self._k, queue=q, now_ms=now_ms, cap=COUNT_CAP, bound=OLDEST_BOUND)
            for q in names
        ]
        out = []
        for queue, reply in zip(names, await self._x.batch(batch), strict=True):
            ready, scheduled, running, waiting, dead, failed, oldest, flag, held = reply
            if not int(held) and queue not in paused:
                continue  # every job of it was removed: no longer a known queue
            out.append(
                QueueCounts(
                    queue=queue,
                    ready=int(ready),
                    scheduled=int(scheduled),
                    running=int(running),
                    waiting=int(waiting),
                    dead=int(dead),
                    failed=int(failed),
                    oldest_ready_ms=int(oldest) if oldest else None,
                    paused=int(flag) == 1,
                )
            )
        return out

    async def counters(self, tier: CounterTier, since_ms: int) -> list[CounterBucket]:
        return await read_counters(self._x, self._k, await self._queues(), tier, since_ms)

    async def rollup_counters(self, now_ms: int) -> int:
        return await roll_up(self._x, self._k, await self._queues(), now_ms)

    # -- pauses -----------------------------------------------------------------------------------

    async def pause(self, kind: PauseKind, name: str) -> bool:
        return await self._pauses.pause(kind, name)

    async def resume(self, kind: PauseKind, name: str) -> bool:
        return await self._pauses.resume(kind, name)

    async def pauses(self) -> list[Pause]:
        return await self._pauses.pauses()

    # -- one job ----------------------------------------------------------------------------------

    async def promote(self, job_id: str) -> JobMove:
        """Three round trips: the queue set, the queue's job, then `promote.lua`."""
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            return JobMove("missing")
        call = calls.promote(
            self._k, now=self._x.now(), queue=queue, job_ids=[job_id], answer_records=True
        )
        (reply,) = await self._x.run(call)
        return job_move(reply)

    async def remove(self, job_id: str) -> JobMove:
        """Three round trips (the queue set, the job's run id, `remove.lua`), and a fourth that
        drops the removed job's event wait, if it had one."""
        names = await self._queues()
        reads = [_hmget(self._k.job(q, job_id), stored_names("run_id")) for q in names]
        run_ids = [first_present(r) for r in await self._x.batch(reads)]
        found = [(q, r) for q, r in zip(names, run_ids, strict=True) if r is not None]
        if not found:
            return JobMove("missing")
        queue, run_id = found[0]
        call = calls.remove(self._k, queue=queue, jobs=[(job_id, run_id)], answer_records=True)
        (reply,) = await self._x.run(call)
        move = job_move(reply)
        if move.status == "done":
            await self._x.run(event_calls.wait_drop(self._k, queue=queue, job_ids=[job_id]))
        return move

    # -- bulk: select oldest first across queues, then move one script per queue ------------------

    async def cancel_many(self, where: JobFilter, limit: int, reason: str | None) -> BulkResult:
        states = only_states(where, sorted(LIVE_STATES))
        picked, remaining = await self._select(where, states, limit)
        error = f"cancelled: {reason}" if reason else "cancelled"
        now = self._x.now()
        by_queue = _by_queue(picked)
        batch = [
            job_calls.cancel(
                self._k, now=now, queue=q, job_ids=ids, error=error, answer_records=False
            )
            for q, ids in by_queue.items()
        ]
        replies = await self._x.batch(batch)
        cancelled = [
            self._k.job(q, job_id)
            for (q, ids), reply in zip(by_queue.items(), replies, strict=True)
            for job_id, answer in zip(ids, reply, strict=True)
            if str(answer[0]) == "cancelled"
        ]
        await self._endings.deliver(by_queue)
        await self._endings.cascade(cancelled)  # their live non-detached descendants
        return BulkResult(_moved(replies, "cancelled"), remaining)

    async def promote_many(self, where: JobFilter, limit: int) -> BulkResult:
        if where.states and "ready" not in where.states:
            return BulkResult(0, 0)
        now_ms = self._clock.now_ms()
        picked, remaining = await self._select(where, ("ready",), limit, run_after_ms=now_ms)
        now = self._x.now()
        batch = [
            calls.promote(self._k, now=now, queue=q, job_ids=ids, answer_records=False)
            for q, ids in _by_queue(picked).items()
        ]
        moved = sum(
            int(answer[1])
            for reply in await self._x.batch(batch)
            for answer in reply
            if answer[0] == "promoted"
        )
        return BulkResult(moved, remaining)

    async def remove_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        picked, remaining = await self._select(where, states, limit, fields=("run_id",))
        batch: list[Call | Command] = []
        for queue, rows in _rows_by_queue(picked).items():
            jobs = [(row.id, str(row.fields[0])) for row in rows]
            batch.append(calls.remove(self._k, queue=queue, jobs=jobs, answer_records=False))
        replies = await self._x.batch(batch)
        removed: dict[str, list[str]] = {}
        for (queue, rows), reply in zip(_rows_by_queue(picked).items(), replies, strict=True):
            gone = [
                row.id for row, answer in zip(rows, reply, strict=True) if answer[0] == "removed"
            ]
            if gone:
                removed[queue] = gone
        drops = [event_calls.wait_drop(self._k, queue=q, job_ids=ids) for q, ids in removed.items()]
        await self._x.batch(drops)
        return BulkResult(sum(map(len, removed.values())), remaining)

    async def retry_many(self, where: JobFilter, limit: int) -> BulkResult:
        states = only_states(where, sorted(FINISHED_STATES))
        picked, remaining = await self._select(
            where, states, limit, fields=(*NAMESPACE_FIELDS, "run_id"), free=True
        )
        now = self._x.now()
        batch = [
            job_calls.requeue(
                self._k,
                now=now,
                queue=q,
                jobs=[(row.id, str(row.fields[3])) for row in rows],
                answer_records=False,
            )
            for q, rows in _rows_by_queue(picked).items()
        ]
        return BulkResult(_moved(await self._x.batch(batch), "requeued"), remaining)

    async def _select(
        self,
        where: JobFilter,
        states: Sequence[str],
        limit: int,
        *,
        fields: Sequence[str] = (),
        run_after_ms: int | None = None,
        free: bool = False,
    ) -> tuple[list[Row], int]:
        """Up to `limit` jobs oldest first, and how many more match (at most `COUNT_CAP`).

        With `free`, one job per idempotency namespace (the oldest), so a bulk requeue never
        makes a duplicate and never counts one as remaining.
        """
        if not states:
            return [], 0
        found = sources(
            await self._queues(where), where, states, run_after_ms=run_after_ms, free=free
        )
        walk = Walk(self._x, self._k, found, newest=False, fields=fields)
        taken: set[tuple[Any, ...]] = set()

        async def next_rows(n: int, max_examined: int | None) -> list[Row]:
            out: list[Row] = []
            while len(out) < n:
                rows = await walk.take(n - len(out), max_examined=max_examined)
                if not rows:
                    break
                for row in rows:
                    namespace = _namespace(row) if free else (row.id,)
                    if namespace not in taken:
                        taken.add(namespace)
                        out.append(row)
            return out

        picked = await next_rows(limit, None) if limit > 0 else []
        if len(picked) < limit:
            return picked, 0
        rest = await next_rows(COUNT_CAP, walk.examined + REMAINING_SCAN)
        return picked, len(rest)


def _namespace(row: Row) -> tuple[str, ...]:
    """A walked job's idempotency namespace (per queue on Redis), from its NAMESPACE_FIELDS."""
    name, tenant, key = row.fields[:3]
    return (row.queue, str(name), str(tenant or ""), str(key))


def _hget(key: str, field: str) -> Command:
    return lambda pipe: pipe.hget(key, field)


def _hmget(key: str, fields: Sequence[str]) -> Command:
    return lambda pipe: pipe.hmget(key, fields)


def _rows_by_queue(rows: list[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row.queue].append(row)
    return grouped


def _by_queue(rows: list[Row]) -> dict[str, list[str]]:
    return {q: [row.id for row in grouped] for q, grouped in _rows_by_queue(rows).items()}


def _moved(replies: list[Any], status: str) -> int:
    return sum(1 for reply in replies for answer in reply if answer[0] == status)
