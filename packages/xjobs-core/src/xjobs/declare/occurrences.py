"""Which instants a cron expression names in an IANA zone, as epoch ms, with the DST rules applied.

A spring-forward gap moves a fixed-time occurrence to the first instant after the gap (croniter's
rule, so no day is lost). In a fall-back repeat, a fixed-hour expression fires only the first of
the two identical wall times (no double fire); an expression whose hour field starts with `*`
follows elapsed time and fires both.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import croniter

CRON_MACRO_HOURS = {"@hourly": "*"}


def _follows_elapsed_time(cron: str) -> bool:
    """Whether the hour field is a wildcard (`*`, `*/2`): such an expression fires in both repeats."""
    if cron.startswith("@"):
        return CRON_MACRO_HOURS.get(cron) == "*"
    return cron.split(" ")[1].startswith("*")


def _is_repeat(instant: datetime, zone: ZoneInfo) -> bool:
    """Whether `instant` is the second of two identical wall times (the fall-back hour)."""
    return instant.astimezone(UTC).astimezone(zone).fold == 1


def to_datetime(ms: int, zone: ZoneInfo) -> datetime:
    """The wall time in `zone` of the epoch-ms instant `ms`."""
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone)


def to_ms(instant: datetime) -> int:
    """The epoch-ms instant of an aware datetime, rounded to the millisecond."""
    return round(instant.timestamp() * 1000)


def iter_after(cron: str, zone: ZoneInfo, after_ms: int) -> Iterator[int]:
    """Every occurrence strictly after `after_ms`, ascending, without end."""
    skip_repeats = not _follows_elapsed_time(cron)
    it = croniter(cron, to_datetime(after_ms, zone))
    last = after_ms
    while True:
        nxt: datetime = it.get_next(datetime)
        ms = to_ms(nxt)
        if ms <= last or (skip_repeats and _is_repeat(nxt, zone)):
            continue
        last = ms
        yield ms


def next_after(cron: str, zone: ZoneInfo, after_ms: int) -> int:
    """The first occurrence strictly after `after_ms`."""
    return next(iter_after(cron, zone, after_ms))


def latest_due(cron: str, zone: ZoneInfo, after_ms: int, until_ms: int, count: int) -> list[int]:
    """The latest `count` occurrences in `(after_ms, until_ms]`, ascending.

    croniter walks back from `until_ms` only to find where to start; the forward walk decides
    which instants are occurrences, so the DST rules are the ones `iter_after` applies.
    """
    start = after_ms
    back = croniter(cron, to_datetime(until_ms + 1000, zone))
    for _ in range(count + 1):
        prev = to_ms(back.get_prev(datetime))
        if prev <= after_ms:
            break
        start = prev - 1
    due: list[int] = []
    for ms in iter_after(cron, zone, start):
        if ms > until_ms:
            break
        due.append(ms)
    return due[-count:]
