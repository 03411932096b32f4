"""The event bus: events by tenant, and parked runs' waits, each send and park one write transaction."""

from __future__ import annotations

from dataclasses import replace

from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import Claim, Nack
from xjobs.contract.stores import EventRecord, EventWait
from xjobs.event_match import decode_object, matches
from xjobs.ids import new_id
from xjobs_sqlite import settle
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


def find_event(
    conn: Connection, name: str, match: str, since_ms: int, tenant: str | None
) -> EventRecord | None:
    """The earliest event of `name` in `tenant` since `since_ms` whose payload `match` matches."""
    wanted = decode_object(match)
    params = {"name": name, "tenant": tenant, "since_ms": since_ms}
    for row in conn.execute(sql("event_candidates"), params):
        if matches(decode_object(row[2]), wanted):
            return EventRecord(*row)
    return None


def _send(conn: Connection, record: EventRecord) -> set[str]:
    """Store the event and wake each matching wait of its tenant; the queues woken."""
    conn.execute(
        sql("event_insert"),
        {
            "id": record.id,
            "tenant": record.tenant,
            "name": record.name,
            "payload": record.payload,
            "now": record.sent_at_ms,
        },
    )
    body = decode_object(record.payload)
    waits = conn.execute(
        sql("waits_of_event"), {"name": record.name, "tenant": record.tenant}
    ).fetchall()
    woken: set[str] = set()
    for job_id, run_id, queue, match in waits:
        if not matches(body, decode_object(match)):
            continue
        conn.execute(sql("wait_drop"), {"job_id": job_id})
        params = {"job_id": job_id, "run_id": run_id, "now": record.sent_at_ms}
        if conn.execute(sql("wake_waiting"), params).rowcount:
            woken.add(str(queue))
    return woken


def _park(conn: Connection, claim: Claim, wait: EventWait, nack: Nack, now: int) -> bool:
    """Look for a match already sent, park the job (fenced), and only then register the wait."""
    if find_event(conn, wait.event, wait.match, wait.since_ms, wait.tenant) is not None:
        nack = replace(nack, run_at_ms=now)
    if not settle.nack(conn, claim, nack, now):
        return False
    conn.execute(
        sql("wait_put"),
        {
            "job_id": wait.job_id,
            "run_id": wait.run_id,
            "queue": wait.queue,
            "step": wait.step,
            "event": wait.event,
            "tenant": wait.tenant,
            "match": wait.match,
            "since_ms": wait.since_ms,
            "deadline_ms": wait.deadline_ms,
        },
    )
    return True


class SqliteEventBus:
    """`EventBus` over `events` and `event_waits`, on the injected clock (its one clock)."""

    def __init__(self, executor: Executor, wake: WakeSource) -> None:
        self._x = executor
        self._wake = wake

    async def now(self) -> int:
        """The bus's clock: the injected one."""
        return self._x.now()

    async def send(self, name: str, payload: str, *, tenant: str | None = None) -> EventRecord:
        """Store an event and wake the matching parked runs of its tenant, atomically."""
        record = EventRecord(new_id(), name, payload, self._x.now(), tenant)
        woken = await self._x.write(lambda conn: _send(conn, record))
        for queue in sorted(woken):
            self._wake.emit(queue)
        return record

    async def find(
        self, name: str, match: str, since_ms: int, *, tenant: str | None = None
    ) -> EventRecord | None:
        """The earliest matching event of `tenant` since `since_ms`."""
        return await self._x.read(lambda conn: find_event(conn, name, match, since_ms, tenant))

    async def park(self, claim: Claim, wait: EventWait, nack: Nack) -> bool:
        """Register the wait and park the job atomically; due now when a match was already sent."""
        now = self._x.now()
        parked = await self._x.write(lambda conn: _park(conn, claim, wait, nack, now))
        if parked and claim.queue is not None:
            self._wake.emit(claim.queue)
        return parked

    async def purge_expired(self, older_than_ms: int) -> int:
        """Delete events sent before `older_than_ms` and waits whose deadline passed before it."""
        return await self._x.write(lambda conn: purge_events(conn, older_than_ms, None))


def purge_events(conn: Connection, older_than_ms: int, limit: int | None) -> int:
    """Delete up to `limit` (`None`: all) old events and lapsed waits; how many went."""
    params = {"before": older_than_ms, "limit": -1 if limit is None else limit}
    gone = conn.execute(sql("purge_events"), params).rowcount
    left = -1 if limit is None else max(limit - gone, 0)
    if left == 0:
        return gone
    return gone + conn.execute(sql("purge_waits"), {**params, "limit": left}).rowcount
