"""The Redis result store: a result stored by the ack script, a waiter woken by pub/sub.

`complete` is `ack.lua` with the result as its last argument: one fenced script, no second write;
a body that returns `None` goes through the plain ack. `wait` subscribes to the job's queue's
settled channel, then flags the job watched (`watch.lua`); only a watched job's settle publishes
(ack, a terminal nack, cancel, the claim's burial), once, consuming the flag. The timeout is the
fallback: a message lost to a reconnect costs latency only, as the caller reads again.
"""

from __future__ import annotations

import asyncio
import contextlib

from xjobs.contract.driver import LIVE_STATES, Claim
from xjobs.contract.results import StoredResult
from xjobs_redis.calls import jobs as calls
from xjobs_redis.driver import RedisJobDriver
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys
from xjobs_redis.locate import locate, queue_of
from xjobs_redis.purge import Expiry
from xjobs_redis.rows import JOB_DEFAULTS, job_state, stored_names


class RedisResults:
    """`ResultStore` over the job HASHes: the `result` field beside `state` and `last_error`."""

    def __init__(
        self,
        executor: Executor,
        keys: Keys,
        expiry: Expiry | None = None,
        jobs: RedisJobDriver | None = None,
    ) -> None:
        self._x = executor
        self._k = keys
        self._expiry = expiry or Expiry()
        self._jobs = jobs or RedisJobDriver(executor, keys, self._expiry)

    async def complete(self, claim: Claim, result: str) -> bool:
        queue = await queue_of(self._x, self._k, claim)
        if queue is None:
            return False
        now, keep = self._x.now(), self._expiry.json
        call = calls.ack(self._k, now=now, queue=queue, claim=claim, result=result, keep=keep)
        return await self._jobs.settled(queue, await self._x.run(call))

    async def read(self, job_id: str) -> StoredResult | None:
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            return None
        key = self._k.job(queue, job_id)
        (fields,) = await self._x.batch(
            [
                lambda pipe: pipe.hmget(
                    key, *stored_names("created_at_ms"), "state", "result", "last_error"
                )
            ]
        )
        short, created, state, result, last_error = (None if v is None else str(v) for v in fields)
        if short is None and created is None:
            return None  # every job stores created_at_ms; an absent state is its default
        return StoredResult(job_state(state or JOB_DEFAULTS["state"]), result, last_error)

    async def wait(self, job_id: str, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        queue = await locate(self._x, self._k, job_id)
        if queue is None:
            return
        pubsub = self._x.client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self._k.settled_channel(queue))
            state = str(await self._x.run(calls.watch(self._k, queue=queue, job_id=job_id)))
            if state not in LIVE_STATES:
                return  # settled (or gone) before the flag: nothing will be published
            while (left := deadline - loop.time()) > 0:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=left)
                if message is not None and str(message["data"]) == job_id:
                    return
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
