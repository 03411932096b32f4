"""When an enqueued job is due: `delay=` or `run_at=` as epoch milliseconds, inside the bounds
every backend stores and reads back alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from xjobs.declare.job import EnqueueOptions
from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
# The earliest run_at: the epoch (a time before it is a mistake, not a schedule).
MIN_RUN_AT_MS = 0
# The latest run_at: the last millisecond a Python datetime holds (9999-12-31 23:59:59.999 UTC).
# Every backend stores it as an exact integer and every read turns it back into a datetime.
MAX_RUN_AT_MS = (datetime.max.replace(tzinfo=UTC) - EPOCH) // MS


def _bounded(name: str, at_ms: int, shown: object) -> int:
    if not MIN_RUN_AT_MS <= at_ms <= MAX_RUN_AT_MS:
        raise OptionInvalidError(
            f"{name} must land between 1970-01-01 and 9999-12-31 23:59:59.999 UTC, got {shown!r}"
        )
    return at_ms


def run_at_ms(options: EnqueueOptions, now_ms: int) -> int | None:
    """The epoch ms the job is due at (`None`: now), or `OptionInvalidError` for both options, a
    naive `run_at`, a negative or non-finite `delay`, or a time outside the bounds."""
    if options.delay is not None and options.run_at is not None:
        raise OptionInvalidError("pass delay= or run_at=, not both")
    if options.delay is not None:
        delay = duration_ms("delay", options.delay, allow_zero=True)
        return _bounded("delay", now_ms + delay, options.delay)
    if options.run_at is not None:
        if not isinstance(options.run_at, datetime) or options.run_at.tzinfo is None:
            raise OptionInvalidError(f"run_at must be an aware datetime, got {options.run_at!r}")
        return _bounded("run_at", (options.run_at - EPOCH) // MS, options.run_at)
    return None
