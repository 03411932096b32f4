"""The Postgres event bus: `<schema>.events` and `<schema>.event_waits`, each row of one tenant, a
send and a park serialised per event name."""

from __future__ import annotations

from dataclasses import replace

from xjobs.contract.driver import Claim, Nack
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.ids import new_id
from xjobs_pg.errors import interpret_error
from xjobs_pg.executor import Executor
from xjobs_pg.params import NackParams, One
from xjobs_pg.purge import purge_events_before
from xjobs_pg.store_params import EventWakeParams, FindParams, RegisterParams, SendParams
from xjobs_pg.wake_slots import WakeSlots


class _Missed(Exception):
    """The park's fence missed: raised inside its transaction so the wait it wrote is rolled back."""


class PostgresEventBus:
    """One clock: the injected one, or the server's `clock_timestamp()` when it is the system clock.

    A send and a park of one event name take the same transaction advisory lock, so a park sees
    every event sent before it and a send wakes every wait parked before it: no wake is lost.
    """

    def __init__(self, executor: Executor, wake: WakeSlots) -> None:
        self._x = executor
        self._wake = wake

    async def now(self) -> int:
        now = self._x.now()
        if now is not None:
            return now
        row = await self._x.fetchrow("event_now")
        assert row is not None
        return int(row["now_ms"])

    async def send(self, name: str, payload: str, *, tenant: str | None = None) -> EventRecord:
        sql = self._x.sql
        try:
            async with self._x.pool.acquire() as conn, conn.transaction():
                await conn.execute(sql["event_lock"], *One(name).bind())
                send = SendParams(self._x.now(), new_id(), name, payload, tenant)
                row = await conn.fetchrow(sql["event_send"], *send.bind())
                assert row is not None
                woken = self._wake.take(row["queues"])
                if woken:
                    wake = EventWakeParams(self._wake.channel, woken)
                    await conn.execute(sql["event_wake"], *wake.bind())
        except Exception as exc:
            raise interpret_error(exc) from exc
        return EventRecord(str(row["id"]), name, payload, row["sent_at_ms"], tenant)

    async def find(
        self, name: str, match: str, since_ms: int, *, tenant: str | None = None
    ) -> EventRecord | None:
        row = await self._x.fetchrow("event_find", FindParams(name, match, since_ms, tenant))
        if row is None:
            return None
        return EventRecord(str(row["id"]), row["name"], row["payload"], row["sent_at_ms"], tenant)

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        sql = self._x.sql
        try:
            async with self._x.pool.acquire() as conn, conn.transaction():
                await conn.execute(sql["event_lock"], *One(wait.event).bind())
                row = await conn.fetchrow(sql["event_register"], *RegisterParams(wait).bind())
                assert row is not None
                if row["sent"]:
                    # A matching event is already stored: due now (a null run_at is the statement's now).
                    nack = replace(nack, run_at_ms=None)
                park = NackParams(self._x.now(), claim, nack)
                landed = await conn.fetchval(sql["nack"], *park.bind())
                if landed != 1:
                    raise _Missed
        except _Missed:
            return False
        except Exception as exc:
            raise interpret_error(exc) from exc
        return True

    async def purge_expired(self, older_than_ms: int) -> int:
        return await purge_events_before(self._x, older_than_ms)
