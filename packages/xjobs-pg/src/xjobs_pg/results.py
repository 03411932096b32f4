"""The Postgres result store: a result stored by the fenced complete, a waiter woken by NOTIFY.

`complete` is the ack statement with the result written in its update: one fenced statement,
counted as an ack; a body that returns `None` goes through the plain ack. `wait` makes sure the
backend's `LISTEN` session is proven, then registers the call as a watcher of the job
(`result_watch`: a row of `result_watches`; the job row is not updated, so no claim racing the
watch skips a ready job for it) and reads the job's state (`result_state`: a finished job answers
at once). Only a watched job's finishing statement (ack, complete, a terminal nack, cancel, the
claim's burial) notifies, with the job id on the `<schema>_settled` channel; the watch goes when
the wait ends. A finishing statement whose snapshot predates the watch sees no watcher: the
waiter reads the state again `RECHECK_S` into its wait and then at doubling intervals up to
`RECHECK_MAX_S`, so such a finish costs at most about that long, not the whole wait (however
late the statement takes the row). The timeout is the last fallback: a notification lost to a re-dial costs latency
only, as the caller reads again.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid

from xjobs.contract.driver import Claim
from xjobs.contract.results import StoredResult
from xjobs_pg.executor import Executor
from xjobs_pg.params import CompleteParams, One, UnwatchParams, WatchParams
from xjobs_pg.wake import WakeListener

log = logging.getLogger("xjobs_pg.results")

# A watch row outlives its wait by this much; one left by a process that died waiting is then
# swept by the next watch.
WATCH_MARGIN_MS = 60_000
# Into a wait, the state is read again, first after RECHECK_S, then at doubling intervals up to
# RECHECK_MAX_S: a finish whose statement began before the watch landed notifies no one, and is
# found by the next read (a ready or waiting job is read without a lock: no claim skips it).
RECHECK_S = 0.05
RECHECK_MAX_S = 1.0
# The delete of a watch row is given this long (a wait that ends, or is cancelled, with the pool
# exhausted does not hang on it); a row it leaves expires.
UNWATCH_TIMEOUT_S = 1.0
LIVE_STATES = frozenset({"ready", "running", "waiting"})


class SettleWaiters:
    """This process's result waiters, by job id, woken by the listening session."""

    def __init__(self) -> None:
        self._by_job: dict[str, list[asyncio.Future[None]]] = {}

    def add(self, job_id: str) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._by_job.setdefault(job_id, []).append(waiter)
        return waiter

    def drop(self, job_id: str, waiter: asyncio.Future[None]) -> None:
        waiters = self._by_job.get(job_id)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._by_job[job_id]

    def settled(self, job_id: str) -> None:
        """A notification: the job finished (the payload is its id as Postgres prints a uuid)."""
        for waiter in self._by_job.pop(job_id, []):
            if not waiter.done():
                waiter.set_result(None)


class PostgresResults:
    """`ResultStore` over the jobs table: its `result` column beside `state` and `last_error`."""

    def __init__(
        self, executor: Executor, listener: WakeListener, waiters: SettleWaiters, channel: str
    ) -> None:
        self._x = executor
        self._listener = listener
        self._waiters = waiters
        self._channel = channel

    async def complete(self, claim: Claim, result: str) -> bool:
        if _job_key(claim.job_id) is None:
            return False
        return await self._x.landed("complete", CompleteParams(self._x.now(), claim, result))

    async def read(self, job_id: str) -> StoredResult | None:
        key = _job_key(job_id)
        if key is None:
            return None
        row = await self._x.fetchrow("result_read", One(key))
        if row is None:
            return None
        return StoredResult(row["state"], row["result"], row["last_error"])

    async def wait(self, job_id: str, timeout_ms: int) -> None:
        key = _job_key(job_id)
        if key is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000
        waiter = self._waiters.add(key)
        token = ""
        try:
            # Listening (proven) before the watch: a finish after the watch is never missed.
            if not await self._listener.until_live(deadline - loop.time()):
                return  # no proven session in time: the caller reads again (the poll fallback)
            token = secrets.token_hex(8)
            ttl_ms = max(timeout_ms, 0) + WATCH_MARGIN_MS
            await self._x.execute(
                "result_watch", WatchParams(key, token, self._channel, self._x.now(), ttl_ms)
            )
            if not await self._live(key):
                return  # finished (or gone) before the watch: nothing will notify
            slice_s = RECHECK_S
            while (left := deadline - loop.time()) > 0:
                try:
                    async with asyncio.timeout(min(slice_s, left)):
                        await asyncio.shield(waiter)
                    return
                except TimeoutError:
                    if not await self._live(key):
                        return  # a finish that began before the watch: it notified no one
                slice_s = min(slice_s * 2, RECHECK_MAX_S)
        finally:
            self._waiters.drop(key, waiter)
            if token:
                await self._unwatch(key, token)

    async def _live(self, key: str) -> bool:
        """Whether the job is still live (`result_state`: waits out a finish holding its row)."""
        row = await self._x.fetchrow("result_state", One(key))
        return row is not None and row["state"] in LIVE_STATES

    async def _unwatch(self, key: str, token: str) -> None:
        """Delete the call's watch row; one that stays (the store did not answer in time) expires."""
        try:
            async with asyncio.timeout(UNWATCH_TIMEOUT_S):
                await self._x.execute("result_unwatch", UnwatchParams(key, token))
        except Exception:
            log.debug("jobs.results.unwatch-failed", extra={"job_id": key}, exc_info=True)


def _job_key(job_id: str) -> str | None:
    """`job_id` as Postgres prints the uuid (a notification's payload), or `None`: it names no row."""
    try:
        return str(uuid.UUID(job_id))
    except (ValueError, TypeError, AttributeError):
        return None
