"""The Redis job driver: every rule the memory backend pins, each operation one Lua script per queue."""

from __future__ import annotations

from collections.abc import Sequence

from xjobs.contract.driver import (
    Claim,
    ClaimOptions,
    ClaimResult,
    EnqueueResult,
    JobMove,
    JobRecord,
    Nack,
    NewJob,
)
from xjobs_redis.calls import jobs as calls
from xjobs_redis.claim import ClaimPass
from xjobs_redis.endings import ChildEndings
from xjobs_redis.executor import Call, Command, Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import locate, queue_of, queues, reader
from xjobs_redis.purge import Expiry
from xjobs_redis.registry import QueueRegistry
from xjobs_redis.rows import (
    enqueue_result,
    first_present,
    job_move,
    job_record,
    stored_columns,
    stored_names,
)


class RedisJobDriver:
    """Jobs as HASHes indexed per queue; each operation is an atomic script on the queue's slot."""

    def __init__(self, executor: Executor, keys: Keys, expiry: Expiry | None = None) -> None:
        self._x = executor
        self._k = keys
        # The retention policy every settle passes its script (a finished job's keys expire).
        self._expiry = expiry or Expiry()
        # A child's terminal script records its ending; these steps carry it to its group.
        self.endings = ChildEndings(executor, keys)
        self._claim = ClaimPass(executor, keys, self.endings)
        self._registry = QueueRegistry(executor, keys)

    # -- enqueue and claim --------------------------------------------------------------------

    async def enqueue(
        self, jobs: Sequence[NewJob], *, links: Sequence[str] | None = None
    ) -> list[EnqueueResult]:
        """One round trip: one `enqueue.lua` per queue (pipelined when there are several), each
        publishing its wake when it inserted a due row; a queue this driver has not seen joined
        joins the queue set in that round trip on one server, in three more on a Cluster
        (`xjobs_redis.registry`). `links[i]` links `jobs[i]` to its child group (a spawn)."""
        if not jobs:
            return []
        by_queue: dict[str, list[int]] = {}
        for index, job in enumerate(jobs):
            by_queue.setdefault(job.queue, []).append(index)
        now = self._x.now()
        batch = [
            (
                queue,
                calls.enqueue(
                    self._k,
                    now=now,
                    queue=queue,
                    jobs=[jobs[i] for i in indexes],
                    links=None if links is None else [links[i] for i in indexes],
                ),
            )
            for queue, indexes in by_queue.items()
        ]
        replies = await self._registry.enqueue(batch)
        results: list[EnqueueResult | None] = [None] * len(jobs)
        for indexes, reply in zip(by_queue.values(), replies, strict=True):
            for index, answer in zip(indexes, reply, strict=True):
                results[index] = enqueue_result(jobs[index], answer)
        return [result for result in results if result is not None]

    async def claim(self, options: ClaimOptions) -> ClaimResult:
        return await self._claim(options)

    # -- settles, each fenced on state running and the claim ----------------------------------

    async def ack(self, claim: Claim) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        keep = self._expiry.json
        call = calls.ack(self._k, now=self._x.now(), queue=queue, claim=claim, keep=keep)
        return await self.settled(queue, await self._x.run(call))

    async def settled(self, queue: str, reply: object) -> bool:
        """A fenced settle's reply as landed or not; a child's ending it recorded (reply 2) is
        delivered to its group first."""
        if reply == 2:
            await self.endings.deliver([queue])
        return reply in (1, 2)

    async def ack_many(self, claims: Sequence[Claim]) -> list[bool]:
        """One `ack_many.lua` a queue, each run in it fenced on its own claim, all in one
        pipelined round trip (on a Cluster the pipeline sends each node its own calls: every call
        stays in its queue's slot)."""
        now, keep = self._x.now(), self._expiry.json
        landed = [False] * len(claims)
        by_queue: dict[str, list[int]] = {}
        for i, claim in enumerate(claims):
            queue = await queue_of(self._x, self._k, claim)
            if queue is not None:
                by_queue.setdefault(queue, []).append(i)
        batch: list[Call | Command] = [
            calls.ack_many(self._k, now=now, queue=q, claims=[claims[i] for i in sent], keep=keep)
            for q, sent in by_queue.items()
        ]
        ended: list[str] = []
        for (queue, sent), replies in zip(
            by_queue.items(), await self._x.batch(batch), strict=True
        ):
            for i, reply in zip(sent, replies, strict=True):
                landed[i] = reply in (1, 2)
            if 2 in replies:
                ended.append(queue)
        await self.endings.deliver(ended)
        return landed

    async def nack(self, claim: Claim, nack: Nack) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        now, keep = self._x.now(), self._expiry.json
        call = calls.nack(self._k, now=now, queue=queue, claim=claim, nack=nack, keep=keep)
        return await self.settled(queue, await self._x.run(call))

    async def heartbeat(self, claim: Claim, lease_ms: int) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        now = self._x.now()
        call = calls.heartbeat(self._k, now=now, queue=queue, claim=claim, lease_ms=lease_ms)
        return bool(await self._x.run(call) == 1)

    async def record_progress(self, claim: Claim, progress: float) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        now = self._x.now()
        call = calls.record_progress(self._k, now=now, queue=queue, claim=claim, progress=progress)
        return bool(await self._x.run(call) == 1)

    # -- operator moves: each answers a `JobMove`; core raises the refusal ----------------------

    async def cancel(self, job_id: str, reason: str | None = None) -> JobMove:
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            return JobMove("missing")
        error = f"cancelled: {reason}" if reason else "cancelled"
        call = calls.cancel(
            self._k,
            now=self._x.now(),
            queue=queue,
            job_ids=[job_id],
            error=error,
            answer_records=True,
        )
        (reply,) = await self._x.run(call)
        if reply[0] == "cancelled":
            await self.endings.deliver([queue])
            await self.endings.cascade([self._k.job(queue, job_id)])
        return job_move(reply)

    async def requeue(self, job_id: str) -> JobMove:
        """Two round trips to find the job's queue and run (the queue set, the run id in each),
        then `requeue.lua`."""
        found = await self._run_of(job_id)
        if found is None:
            return JobMove("missing")
        queue, run_id = found
        call = calls.requeue(
            self._k, now=self._x.now(), queue=queue, jobs=[(job_id, run_id)], answer_records=True
        )
        (reply,) = await self._x.run(call)
        return job_move(reply)

    async def _run_of(self, job_id: str) -> tuple[str, str] | None:
        """The queue holding `job_id` and its run id, or `None` when no queue does."""
        names = await queues(self._x, self._k)
        if not names:
            return None
        keys = [self._k.job(q, job_id) for q in names]
        runs = [first_present(r) for r in await self._x.batch([_run_id(key) for key in keys])]
        found = [(q, r) for q, r in zip(names, runs, strict=True) if r is not None]
        return found[0] if found else None

    async def get(self, job_id: str) -> JobRecord | None:
        """Two round trips: the queue set, then every queue's candidate job HASH, pipelined."""
        names = await queues(self._x, self._k)
        if not names:
            return None
        replies = await self._x.batch([reader("hgetall", self._k.job(q, job_id)) for q in names])
        for queue, reply in zip(names, replies, strict=True):
            row = stored_columns({str(f): str(v) for f, v in dict(reply).items()}, job_id, queue)
            if row:
                return job_record(row)
        return None


def _run_id(key: str) -> Command:
    return lambda pipe: pipe.hmget(key, stored_names("run_id"))
