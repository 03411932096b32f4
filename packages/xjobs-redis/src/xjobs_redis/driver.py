"""The Redis job driver: every rule the memory backend pins, each operation one Lua script per queue."""

from __future__ import annotations

from collections.abc import Sequence

from xjobs.contract.driver import (
    FINISHED_STATES,
    BulkResult,
    Claim,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobRecord,
    Nack,
    NewJob,
    RequeueFilter,
)
from xjobs.errors import (
    JobNotCancellableError,
    JobNotFoundError,
    JobNotRequeueableError,
    JobRequeueDuplicateError,
)
from xjobs_redis.claim import ClaimPass
from xjobs_redis.executor import Arg, Call, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import locate, queue_of, queues, reader
from xjobs_redis.rows import enqueue_row, flat_hash, job_record

FINISHED_ORDER = tuple(sorted(FINISHED_STATES))


class RedisJobDriver:
    """Jobs as HASHes indexed per queue; each operation is an atomic script on the queue's slot."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys
        self._claim = ClaimPass(executor, keys)

    # -- enqueue and claim --------------------------------------------------------------------

    async def enqueue(self, jobs: Sequence[NewJob]) -> list[EnqueueResult]:
        """One round trip: one `enqueue.lua` per queue (pipelined when there are several), each
        adding its queue to the queue set and publishing its wake when it inserted a due row."""
        if not jobs:
            return []
        by_queue: dict[str, list[int]] = {}
        rows = [enqueue_row(job) for job in jobs]
        for index, job in enumerate(jobs):
            by_queue.setdefault(job.queue, []).append(index)
        k = self._k
        channel = k.wake_channel()
        calls: list[Call] = []
        for queue, indexes in by_queue.items():
            keys = [k.ready(queue), k.delayed(queue), k.live(queue), k.queues()]
            keys += [k.job(queue, jobs[i].id) for i in indexes]
            args = [self._x.now(), queue, channel, *(rows[i] for i in indexes)]
            calls.append(Call("enqueue", keys, args))
        if len(calls) == 1:
            replies = [await self._x.run("enqueue", calls[0].keys, calls[0].args)]
        else:
            replies = await self._x.batch(calls)
        results: list[EnqueueResult | None] = [None] * len(jobs)
        for indexes, reply in zip(by_queue.values(), replies, strict=True):
            for index, (job_id, run_id, inserted) in zip(indexes, reply, strict=True):
                results[index] = EnqueueResult(str(job_id), str(run_id), deduped=inserted != 1)
        return [result for result in results if result is not None]

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        return await self._claim(options)

    # -- settles, each fenced on state running and the claim ----------------------------------

    async def ack(self, claim: Claim) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        k = self._k
        keys = [
            k.job(queue, claim.job_id),
            k.leased(queue),
            k.live(queue),
            k.finished(queue, "completed"),
        ]
        args: list[Arg] = [self._x.now(), claim.worker_id, claim.claims]
        return bool(await self._x.run("ack", keys, args) == 1)

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        k = self._k
        keys = [
            *k.rescheduling(queue, claim.job_id),
            k.live(queue),
            k.finished(queue, "dead"),
            k.finished(queue, "failed"),
        ]
        args: list[Arg] = [
            self._x.now(),
            claim.worker_id,
            claim.claims,
            nack.kind,
            "" if nack.run_at_ms is None else nack.run_at_ms,
            1 if nack.counts_as_attempt else 0,
            0 if nack.error is None else 1,
            nack.error or "",
        ]
        return bool(await self._x.run("nack", keys, args) == 1)

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        keys = [self._k.job(queue, claim.job_id), self._k.leased(queue)]
        args: list[Arg] = [self._x.now(), claim.worker_id, claim.claims, lease_ms]
        return bool(await self._x.run("heartbeat", keys, args) == 1)

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        keys = [self._k.job(queue, claim.job_id)]
        args: list[Arg] = [self._x.now(), claim.worker_id, claim.claims, repr(float(progress))]
        return bool(await self._x.run("record_progress", keys, args) == 1)

    # -- operator moves -----------------------------------------------------------------------

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRecord:
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        k = self._k
        keys = [
            k.job(queue, job_id),
            k.ready(queue),
            k.delayed(queue),
            k.leased(queue),
            k.live(queue),
            k.finished(queue, "cancelled"),
        ]
        error = f"cancelled: {reason}" if reason else "cancelled"
        status, *rest = await self._x.run("cancel", keys, [self._x.now(), error])
        if status == "missing":
            raise JobNotFoundError(f"no job has id {job_id!r}")
        if status == "finished":
            raise JobNotCancellableError(
                f"job {job_id} is already {rest[0]}; only a live job can be cancelled"
            )
        return job_record(flat_hash(rest[0]))

    async def requeue(self, job_id: str) -> JobRecord:
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            raise JobNotFoundError(f"no job has id {job_id!r}")
        k = self._k
        keys = [k.job(queue, job_id), k.ready(queue), k.live(queue)]
        keys += [k.finished(queue, state) for state in FINISHED_ORDER]
        status, *rest = await self._x.run("requeue", keys, [self._x.now()])
        if status == "missing":
            raise JobNotFoundError(f"no job has id {job_id!r}")
        if status == "live":
            raise JobNotRequeueableError(
                f"job {job_id} is {rest[0]}; only a finished job can be requeued"
            )
        if status == "duplicate":
            raise JobRequeueDuplicateError(
                f"job {job_id} cannot be requeued: live job {rest[0] or '(unknown)'} holds its "
                "idempotency key"
            )
        return job_record(flat_hash(rest[0]))

    async def requeue_many(self, where: RequeueFilter) -> BulkResult:
        """One script per queue, in queue-name order, each with what is left of the limit."""
        if where.queue is not None:
            names = [where.queue]
        else:
            names = await queues(self._x, self._k)
        states = [state for state in FINISHED_ORDER if state in where.states]
        moved = remaining = 0
        k = self._k
        for queue in names:
            keys = [k.ready(queue), k.live(queue), *(k.finished(queue, s) for s in states)]
            name: tuple[Arg, Arg] = (1, where.name) if where.name is not None else (0, "")
            args: list[Arg] = [self._x.now(), max(where.limit - moved, 0), *name]
            step_moved, step_remaining = await self._x.run("requeue_many", keys, args)
            moved += int(step_moved)
            remaining += int(step_remaining)
        return BulkResult(moved=moved, remaining=remaining)

    async def get(self, job_id: str) -> JobRecord | None:
        """Two round trips: the queue set, then every queue's candidate job HASH, pipelined."""
        names = await queues(self._x, self._k)
        if not names:
            return None
        replies = await self._x.batch([reader("hgetall", self._k.job(q, job_id)) for q in names])
        for reply in replies:
            if reply:
                return job_record({str(f): str(v) for f, v in dict(reply).items()})
        return None
