"""The claim pass across queues: one pipelined round trip of `claim.lua` calls, one per queue.

When the pass's total `limit` is below the sum of the per-queue asks, the queues compete for it
in claim order (priority, run_at, id): a first round trip peeks every asked queue's best
candidates (`peek.lua`, read-only), the best `limit` across queues are picked here, and the
second round trip claims that many from each queue. Every named queue is claimed from, even
for none, so its exhausted lapsed leases are buried on every pass; the burials are answered queue
by queue, each queue's in the order its claim buried them (by lease expiry, then id).
"""

from __future__ import annotations

import time

from xjobs.contract.driver import (
    LAPSED_ON_FINAL_ATTEMPT,
    BuriedJob,
    ClaimedJob,
    ClaimOptions,
    ClaimResult,
    assert_claim_queues,
)
from xjobs_redis.calls import fleet
from xjobs_redis.calls import jobs as calls
from xjobs_redis.endings import ChildEndings
from xjobs_redis.executor import Call, Command, Executor
from xjobs_redis.keys import Keys, job_id_of
from xjobs_redis.rows import buried_job, claimed_job

# The most due delayed jobs one claim call promotes, and lapsed leases it sweeps: a bounded
# script, whatever the backlog (the next pass takes the rest).
SWEEP_BOUND = 1000
# How often a process's claim passes also deliver the child endings recorded in the queues they
# ask (one HGETALL a queue, pipelined): an ending a killed process left between its steps reaches
# its group and wakes its parent within this, with no purge running. A pace, not a rule.
ENDINGS_EVERY_S = 2.0


class ClaimPass:
    """Claims for one driver."""

    def __init__(self, executor: Executor, keys: Keys, endings: ChildEndings) -> None:
        self._x = executor
        self._keys = keys
        self._endings = endings  # a buried child's ending goes on to its group
        self._endings_due = 0.0  # when (monotonic) a pass next delivers its queues' endings

    async def __call__(self, options: ClaimOptions) -> ClaimResult:
        assert_claim_queues(options)
        asks = {queue: max(ask, 0) for queue, ask in options.queues.items()}
        presence = self._presence(options)
        counts = asks
        if options.limit is not None and options.limit < sum(asks.values()):
            if options.limit <= 0:
                counts = dict.fromkeys(asks, 0)
            else:
                counts = await self._pick(asks, options.limit, presence)
                presence = []  # it rode the peek's round trip
        # every ENDINGS_EVERY_S the asked queues' recorded endings ride this round trip, read
        # after their claims (a burial's ending included)
        swept = list(asks) if time.monotonic() >= self._endings_due else []
        if swept:
            self._endings_due = time.monotonic() + ENDINGS_EVERY_S
        claims = [self._claim_call(queue, n, options) for queue, n in counts.items()]
        batch: list[Call | Command] = [*presence, *claims, *self._endings.reads(swept)]
        replies = await self._x.batch(batch)
        claimed: list[tuple[int, int, str, ClaimedJob]] = []
        buried: list[BuriedJob] = []
        burying: list[str] = []
        after = len(presence) + len(claims)
        for queue, reply in zip(counts, replies[len(presence) : after], strict=True):
            jobs, lapsed = reply
            if lapsed:
                burying.append(queue)
            for packed in jobs:
                job, run_at = claimed_job(str(packed), options.worker_id)
                claimed.append((job.priority, run_at, job.id, job))
            buried.extend(buried_job(fields) for fields in lapsed)  # as buried: by lapse
        if swept:
            await self._endings.apply(swept, replies[after:])
        else:
            await self._endings.deliver(burying)
        claimed.sort(key=lambda entry: entry[:3])
        return ClaimResult(jobs=tuple(entry[3] for entry in claimed), buried=tuple(buried))

    def _presence(self, options: ClaimOptions) -> list[Call]:
        """The worker registry refresh that rides the claim's round trip."""
        if options.presence_ttl_ms is None:
            return []
        beat = fleet.worker_beat(
            self._keys,
            now=self._x.now(),
            worker_id=options.worker_id,
            ttl_ms=options.presence_ttl_ms,
        )
        return [beat]

    def _claim_call(self, queue: str, n: int, options: ClaimOptions) -> Call:
        return calls.claim(
            self._keys,
            now=self._x.now(),
            queue=queue,
            take=n,
            worker_id=options.worker_id,
            lease_ms=options.lease_ms,
            buried_error=LAPSED_ON_FINAL_ATTEMPT,
            sweep_bound=SWEEP_BOUND,
        )

    async def _pick(self, asks: dict[str, int], limit: int, presence: list[Call]) -> dict[str, int]:
        """How many to claim from each queue: the best `limit` candidates across the queues."""
        counts = dict.fromkeys(asks, 0)
        asked = [queue for queue, ask in asks.items() if ask > 0]
        now = self._x.now()
        peeks = [
            calls.peek(
                self._keys,
                now=now,
                queue=queue,
                want=min(asks[queue], limit),
                sweep_bound=SWEEP_BOUND,
            )
            for queue in asked
        ]
        replies = await self._x.batch([*presence, *peeks])
        candidates: list[tuple[int, str, str]] = []
        for queue, reply in zip(asked, replies[len(presence) :], strict=True):
            candidates.extend((int(score), job_id_of(str(job)), queue) for score, job in reply)
        for _, _, queue in sorted(candidates)[:limit]:
            counts[queue] += 1
        return counts
