"""The memory outbox: rows staged in a `MemoryTransaction`, visible to the relay once it commits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from xjobs.clock import Clock
from xjobs.contract.backend import WakeSource
from xjobs.contract.driver import EnqueueResult, NewJob
from xjobs.contract.stores import OUTBOX_WAKE
from xjobs.errors import OutboxConnectionInvalidError


@dataclass(eq=False)
class _Staged:
    row: NewJob
    staged_at_ms: int
    claimed_by: str | None = None
    claim_until_ms: int = 0


@dataclass(eq=False)
class MemoryTransaction:
    """The memory backend's stand-in for a caller's transaction: `with MemoryTransaction(app.backend):`.

    Rows staged on it reach the outbox when it commits (a clean exit of the `with`), and never
    when it rolls back (an exception, or `rollback()`).
    """

    store: MemoryOutboxStore
    rows: list[NewJob] = field(default_factory=list)
    done: bool = False

    def commit(self) -> None:
        if not self.done:
            self.done = True
            self.store.commit(self.rows)

    def rollback(self) -> None:
        self.done = True
        self.rows.clear()

    def __enter__(self) -> MemoryTransaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()


class MemoryOutboxStore:
    """Staged rows by id in stage order; a published row is deleted."""

    def __init__(self, clock: Clock, wake: WakeSource) -> None:
        self._clock = clock
        self._wake = wake
        self._rows: dict[str, _Staged] = {}

    def transaction(self) -> MemoryTransaction:
        return MemoryTransaction(self)

    def stage_on(self, conn: object, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        if not isinstance(conn, MemoryTransaction) or conn.store is not self:
            raise OutboxConnectionInvalidError(
                "the memory outbox stages on a MemoryTransaction of the same backend "
                f"(backend.outbox.transaction()), got {type(conn).__name__}"
            )
        if conn.done:
            raise OutboxConnectionInvalidError("this MemoryTransaction has already ended")
        conn.rows.extend(rows)
        return [EnqueueResult(row.id, row.run_id, deduped=False) for row in rows]

    def commit(self, rows: Sequence[NewJob]) -> None:
        now = self._clock.now_ms()
        for row in rows:
            self._rows.setdefault(row.id, _Staged(row, now))
        if any(row.run_at_ms is None or row.run_at_ms <= now for row in rows):
            self._wake.emit(OUTBOX_WAKE)

    async def stage(self, rows: Sequence[NewJob]) -> list[EnqueueResult]:
        with self.transaction() as tx:
            results = self.stage_on(tx, rows)
        return results

    async def claim(self, relay_id: str, limit: int, lease_ms: int) -> list[NewJob]:
        now = self._clock.now_ms()
        free = [s for s in self._rows.values() if s.claimed_by is None or s.claim_until_ms <= now]
        taken = sorted(free, key=lambda s: (s.staged_at_ms, s.row.id))[: max(limit, 0)]
        for staged in taken:
            staged.claimed_by = relay_id
            staged.claim_until_ms = now + lease_ms
        return [staged.row for staged in taken]

    async def mark_published(self, relay_id: str, ids: Sequence[str]) -> int:
        # A lapsed lease nobody retook is still this relay's: marking it spares a republish.
        held = [
            i
            for i in dict.fromkeys(ids)
            if (s := self._rows.get(i)) is not None and s.claimed_by == relay_id
        ]
        for i in held:
            del self._rows[i]
        return len(held)

    async def pending(self) -> int:
        return len(self._rows)
