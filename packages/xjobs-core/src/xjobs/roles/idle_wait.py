"""The wait both polling loops share: floor, doubling, a ceiling of 2 s — 5 s while the wake is proven live."""

from __future__ import annotations

from collections.abc import Callable

CEILING_MS = 2000
CEILING_WITH_WAKE_MS = 5000


class IdleBackoff:
    """How long an idle loop waits before its next pass; a wake or a found job resets it."""

    __slots__ = ("_current_ms", "_floor_ms", "_wake_live")

    def __init__(self, floor_ms: int, wake_live: Callable[[], bool]) -> None:
        self._floor_ms = floor_ms
        self._wake_live = wake_live
        self._current_ms = floor_ms

    @property
    def floor_ms(self) -> int:
        """The shortest wait: after a pass that found work, a wake, or a reset."""
        return self._floor_ms

    def ceiling_ms(self) -> int:
        """The longest idle wait: longer while a live wake stands in for the poll."""
        return CEILING_WITH_WAKE_MS if self._wake_live() else CEILING_MS

    def reset(self) -> None:
        """Back to the floor: a job was found or a wake arrived."""
        self._current_ms = self._floor_ms

    def next_ms(self) -> int:
        """The wait after an empty pass; each empty pass doubles it, up to the ceiling."""
        wait = min(self._current_ms, self.ceiling_ms())
        self._current_ms = min(self._current_ms * 2, self.ceiling_ms())
        return wait
