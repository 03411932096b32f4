"""Which enqueues notify: at most one per queue per `WAKE_SLOT_MS` from this process, never unconditionally.

Every notifying commit serialises behind one Postgres lock, so a burst of enqueues must not each
notify; the poll stays the guarantee, and a worker woken once polls at its floor and finds the
rows a slot silenced.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

WAKE_SLOT_MS = 10


class WakeSlots:
    """Per-queue memory of the last slot this process notified in (one per channel: `for_channel`)."""

    def __init__(self, channel: str, slot_ms: int = WAKE_SLOT_MS) -> None:
        self.channel = channel
        self._slot_ms = slot_ms
        self._last: dict[str, int] = {}

    def take(self, queues: Sequence[str]) -> list[str]:
        """The queues among `queues` whose enqueue may notify now; each is marked for this slot."""
        slot = time.monotonic_ns() // 1_000_000 // self._slot_ms
        woken: list[str] = []
        for queue in queues:
            if self._last.get(queue) != slot:
                self._last[queue] = slot
                woken.append(queue)
        return woken


_by_channel: dict[str, WakeSlots] = {}


def for_channel(channel: str) -> WakeSlots:
    """The process's one `WakeSlots` for `channel`, shared by every backend object on it."""
    slots = _by_channel.get(channel)
    if slots is None:
        slots = _by_channel[channel] = WakeSlots(channel)
    return slots
