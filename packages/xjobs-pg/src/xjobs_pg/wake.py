"""The wake: one `LISTEN` connection per backend, live only after a probe crossed it, unproven on every re-dial.

The same session listens on the result waiters' channel: a watched job's id when it finishes.
Through a declared transaction-pooling proxy no session is dialled at all (`listens=False`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any

import asyncpg

from xjobs.contract.backend import WakeSource
from xjobs_pg.executor import Executor
from xjobs_pg.store_params import ProbeParams

log = logging.getLogger("xjobs_pg.wake")

REDIAL_FLOOR_S = 0.1
REDIAL_CEILING_S = 5.0
PROBE_TIMEOUT_S = 5.0


class WakeListener:
    """Holds the listening session and feeds `source`; a transaction-pooling proxy never proves it."""

    def __init__(
        self,
        dsn: str,
        channel: str,
        source: WakeSource,
        executor: Executor,
        *,
        settled_channel: str | None = None,
        on_settled: Callable[[str], None] | None = None,
        listens: bool = True,
        **connect: Any,
    ) -> None:
        self._dsn = dsn
        self._channel = channel
        self._source = source
        self._executor = executor
        self._settled_channel = settled_channel
        self._on_settled = on_settled
        self._live = asyncio.Event()
        self._connect = connect
        # A LISTEN through a transaction-pooling proxy hears nothing, and leaves a server session
        # listening in the proxy's pool (pgbouncer then logs each notify it drops): never dialled.
        self._listens = listens
        self._task: asyncio.Task[None] | None = None
        self._probe = ""
        self._proved = asyncio.Event()
        self._closing = False
        self._conn: asyncpg.Connection | None = None

    def start(self) -> None:
        if self._task is None and self._listens:
            self._task = asyncio.ensure_future(self._hold())

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if payload == self._probe:
            self._proved.set()
        else:
            self._source.emit(str(payload))

    def _on_settle_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._on_settled is not None:
            self._on_settled(str(payload))

    async def until_live(self, timeout_s: float) -> bool:
        """Start the session if it is not, and answer once a probe proved it (or `False` at the timeout)."""
        self.start()
        if self._live.is_set():
            return True
        if timeout_s <= 0:
            return False
        # Not listening, the wait runs out its time (never proven): a result waiter polls at it.
        try:
            async with asyncio.timeout(timeout_s):
                await self._live.wait()
        except TimeoutError:
            return False
        return True

    async def _hold(self) -> None:
        delay = REDIAL_FLOOR_S
        while not self._closing:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self._dsn, **self._connect)
                self._conn = conn
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                if self._settled_channel is not None:
                    # Proven with the wake: the probe crosses this same session after both LISTENs
                    # (the wake's is the session's last command, as an operator looks it up).
                    await conn.add_listener(self._settled_channel, self._on_settle_notify)
                await conn.add_listener(self._channel, self._on_notify)
                await self._prove()
                delay = REDIAL_FLOOR_S
                # Rows enqueued while no one listened get no wake: every listener re-scans now.
                self._source.emit(None)
                await lost.wait()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("jobs.wake.lost", extra={"error": repr(exc)})
            finally:
                self._live.clear()
                self._source.set_live(False)
                if conn is not None and not conn.is_closed():
                    conn.terminate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, REDIAL_CEILING_S)

    async def _prove(self) -> None:
        """Send a probe through the pool (another session) and trust the wake once it arrives."""
        self._proved.clear()
        self._probe = f"probe:{secrets.token_hex(8)}"
        await self._executor.execute("wake_probe", ProbeParams(self._channel, self._probe))
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # lands as the probe arrives, and close() would then wait on a live session forever.
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self._proved.wait()
        except TimeoutError:
            log.warning("jobs.wake.unproven", extra={"channel": self._channel})
            return
        self._source.set_live(True)
        self._live.set()

    async def close(self) -> None:
        self._closing = True
        if self._conn is not None and not self._conn.is_closed():
            self._conn.terminate()  # ends the session even if a cancellation were lost
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._live.clear()
        self._source.set_live(False)


def _setter(event: asyncio.Event) -> Callable[[object], None]:
    """A termination listener that sets `event` (bound now, not to the loop variable)."""
    return lambda _conn: event.set()
