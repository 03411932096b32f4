"""The Redis step store: a HASH per run on the job's queue slot, each write fenced on the claim."""

from __future__ import annotations

import json

from xjobs.contract.driver import Claim
from xjobs.contract.stores import StepRecord
from xjobs_redis.calls import events as calls
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import queue_of


def decode_record(run_id: str, name: str, text: str) -> StepRecord:
    """One field of the run's HASH as its record."""
    value = json.loads(text)
    return StepRecord(
        run_id=run_id,
        name=name,
        status=value["status"],
        result=value["result"],
        error=value["error"],
        position=int(value["position"]),
        created_at_ms=int(value["created_at_ms"]),
    )


class RedisStepStore:
    """`list` is one HGETALL; `put` is `step_put.lua`, fenced like a settle (`done` is never replaced)."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def list(self, run_id: str, queue: str) -> list[StepRecord]:
        key = self._k.steps(queue, run_id)
        (fields,) = await self._x.batch([lambda pipe: pipe.hgetall(key)])
        records = [decode_record(run_id, str(n), str(t)) for n, t in dict(fields).items()]
        return sorted(records, key=lambda r: (r.position, r.name))

    async def put(self, claim: Claim, record: StepRecord) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        call = calls.step_put(self._k, queue=queue, claim=claim, record=record)
        return bool(await self._x.run(call) == 1)
