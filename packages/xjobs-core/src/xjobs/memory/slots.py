"""The memory lease store: fleet concurrency slots owned by (job id, claim), reclaimed when their TTL lapses."""

from __future__ import annotations

from xjobs.clock import Clock
from xjobs.contract.stores import SlotHolder


class MemorySlotStore:
    """Slots per key, each holder with its expiry."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._slots: dict[str, dict[SlotHolder, int]] = {}

    def _live(self, key: str) -> dict[SlotHolder, int]:
        now = self._clock.now_ms()
        slots = self._slots.setdefault(key, {})
        for holder in [h for h, expires in slots.items() if expires <= now]:
            del slots[holder]
        return slots

    async def acquire(self, key: str, holder: SlotHolder, limit: int, ttl_ms: int) -> bool:
        slots = self._live(key)
        if limit <= 0 or (holder not in slots and len(slots) >= limit):
            return False
        slots[holder] = self._clock.now_ms() + ttl_ms
        return True

    async def renew(self, key: str, holder: SlotHolder, ttl_ms: int) -> bool:
        slots = self._live(key)
        if holder not in slots:
            return False
        slots[holder] = self._clock.now_ms() + ttl_ms
        return True

    async def release(self, key: str, holder: SlotHolder) -> bool:
        return self._live(key).pop(holder, None) is not None

    async def holders(self, key: str) -> list[SlotHolder]:
        return sorted(self._live(key), key=lambda h: (h.job_id, h.claims))
