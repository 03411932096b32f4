"""Fleet concurrency slots: a row per held slot in `slots`, owned by (job id, claim), with a TTL."""

from __future__ import annotations

from xjobs.contract.stores import SlotHolder
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


def _acquire(
    conn: Connection, key: str, holder: SlotHolder, limit: int, ttl_ms: int, now: int
) -> bool:
    """Under the write lock: sweep the key's lapsed slots, count the others, take one if free."""
    conn.execute(sql("slot_sweep"), {"key": key, "now": now})
    mine = {"key": key, "job_id": holder.job_id, "claims": holder.claims}
    others, held = conn.execute(sql("slot_count"), mine).fetchone()
    if limit <= 0 or (not held and others >= limit):
        return False
    conn.execute(sql("slot_take"), {**mine, "now": now, "ttl_ms": ttl_ms})
    return True


class SqliteSlotStore:
    """`SlotStore` over `slots`; an acquire is one write transaction, so two never race."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def acquire(self, key: str, holder: SlotHolder, limit: int, ttl_ms: int) -> bool:
        """Take a slot of `key` unless `limit` unexpired holders have one (a holder's own counts once)."""
        now = self._x.now()
        return await self._x.write(lambda conn: _acquire(conn, key, holder, limit, ttl_ms, now))

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        """Extend the holder's unexpired slot; whether it still held it."""
        params = {
            "key": key,
            "job_id": holder.job_id,
            "claims": holder.claims,
            "now": self._x.now(),
            "ttl_ms": ttl_ms,
        }
        renewed = await self._x.write(lambda conn: conn.execute(sql("slot_renew"), params).rowcount)
        return renewed == 1

    async def release(self, key: str, holder: SlotHolder) -> bool:
        """Give the slot back (idempotent); whether it was held."""
        params = {
            "key": key,
            "job_id": holder.job_id,
            "claims": holder.claims,
            "now": self._x.now(),
        }
        released = await self._x.write(
            lambda conn: conn.execute(sql("slot_release"), params).rowcount
        )
        return released == 1

    async def holders(self, key: str) -> list[SlotHolder]:
        """The unexpired holders of `key`."""
        params = {"key": key, "now": self._x.now()}
        rows = await self._x.read(lambda conn: conn.execute(sql("slot_holders"), params).fetchall())
        return [SlotHolder(str(row[0]), int(row[1])) for row in rows]
