"""Time as integer epoch milliseconds: the `Clock` protocol, the system clock, and a manual clock for tests."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from xjobs.errors import OptionInvalidError


@runtime_checkable
class Clock(Protocol):
    """Where every durable instant comes from, in integer epoch milliseconds."""

    def now_ms(self) -> int:
        """The current instant in epoch milliseconds."""
        ...


class SystemClock:
    """The wall clock."""

    def now_ms(self) -> int:
        """The wall-clock instant in epoch milliseconds."""
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when a test moves it."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self._now = int(start_ms)

    def now_ms(self) -> int:
        """The instant the test last set, in epoch milliseconds."""
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by `ms` (never backward) and answer the new reading."""
        if ms < 0:
            raise OptionInvalidError("a ManualClock never moves backward")
        self._now += int(ms)
        return self._now

    def set(self, ms: int) -> None:
        """Jump to `ms`, which must not be earlier than now."""
        if ms < self._now:
            raise OptionInvalidError("a ManualClock never moves backward")
        self._now = int(ms)

    def __repr__(self) -> str:
        return f"ManualClock({self._now})"


def is_system_clock(clock: Clock) -> bool:
    """Whether `clock` is the wall clock, so a server may use its own time instead."""
    return isinstance(clock, SystemClock)
