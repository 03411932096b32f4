"""Testing helpers shipped with xjobs-core: the driver parity suite, the manual clock, inline runs."""

from xjobs.clock import ManualClock

__all__ = ["ManualClock"]
