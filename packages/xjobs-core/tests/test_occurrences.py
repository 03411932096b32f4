"""Occurrences in a zone across DST (occurrences.py), the catch-up plan (catch_up.py), scheduler options."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from xjobs import TaskHandle, job, task
from xjobs.declare.occurrences import iter_after, latest_due, next_after, to_datetime, to_ms
from xjobs.errors import OptionInvalidError
from xjobs.roles.catch_up import CatchUpPlan, plan_catch_up
from xjobs.roles.scheduler_options import resolve_scheduler_options

HOUR = 3_600_000
DAY = 24 * HOUR


def ms(year: int, month: int, day: int, hour: int = 0, *, tz: str = "UTC") -> int:
    return to_ms(datetime(year, month, day, hour, tzinfo=ZoneInfo(tz)))


def walls(cron: str, tz: str, start: int, end: int) -> list[str]:
    """Every occurrence in `[start, end)` as local wall time with its UTC offset."""
    zone = ZoneInfo(tz)
    out: list[str] = []
    for at in iter_after(cron, zone, start - 1):
        if at >= end:
            return out
        out.append(to_datetime(at, zone).isoformat())
    raise AssertionError("unreachable")


# -- DST: the spring-forward gap loses no day; the fall-back repeat fires a fixed time once --


@pytest.mark.parametrize(
    ("tz", "day", "expected"),
    [
        ("Europe/Paris", 29, "2026-03-29T03:00:00+02:00"),
        ("America/New_York", 8, "2026-03-08T03:00:00-04:00"),
    ],
)
def test_a_daily_time_inside_the_spring_gap_fires_right_after_it(
    tz: str, day: int, expected: str
) -> None:
    got = walls("30 2 * * *", tz, ms(2026, 3, day - 1, tz=tz), ms(2026, 3, day + 2, tz=tz))
    assert len(got) == 3  # no lost day
    assert got[1] == expected


@pytest.mark.parametrize(
    ("tz", "cron", "day", "expected"),
    [
        ("Europe/Paris", "30 2 * * *", (10, 25), "2026-10-25T02:30:00+02:00"),
        ("America/New_York", "30 1 * * *", (11, 1), "2026-11-01T01:30:00-04:00"),
    ],
)
def test_a_daily_time_inside_the_fall_back_repeat_fires_once(
    tz: str, cron: str, day: tuple[int, int], expected: str
) -> None:
    month, dd = day
    start = ms(2026, month, dd, tz=tz) - DAY
    got = walls(cron, tz, start, start + 3 * DAY)
    assert len(got) == 3  # one per day: no double fire
    assert got[1] == expected  # the first of the two identical wall times


@pytest.mark.parametrize(
    ("tz", "month", "day", "repeated"),
    [("Europe/Paris", 10, 25, "02:"), ("America/New_York", 11, 1, "01:")],
)
def test_an_hourly_expression_follows_elapsed_time_through_the_repeat(
    tz: str, month: int, day: int, repeated: str
) -> None:
    start = ms(2026, month, day, tz=tz)
    got = walls("0 * * * *", tz, start, start + 25 * HOUR)
    assert len(got) == 25  # the repeated hour is a real hour: it fires in both
    assert sum(1 for wall in got if f"T{repeated}00:00" in wall) == 2


@pytest.mark.parametrize(("tz", "day"), [("Europe/Paris", 29), ("America/New_York", 8)])
def test_an_hourly_expression_has_23_occurrences_on_the_spring_day(tz: str, day: int) -> None:
    got = walls("0 * * * *", tz, ms(2026, 3, day, tz=tz), ms(2026, 3, day + 1, tz=tz))
    assert len(got) == 23


FIXED = ["30 2 * * *", "0 1 * * *", "15 1,2 * * *", "0 0 * * *", "@daily", "0 2 * * 0", "5 3 1 * *"]
ANY = [*FIXED, "* * * * *", "*/15 * * * *", "0 * * * *", "@hourly", "7 */2 * * *"]
ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "UTC"]
STARTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2080, 1, 1), timezones=st.just(UTC)
)


@settings(database=None, max_examples=200, deadline=None)
@given(tz=st.sampled_from(ZONES), cron=st.sampled_from(ANY), start=STARTS)
def test_occurrences_are_strictly_increasing(tz: str, cron: str, start: datetime) -> None:
    got = list(itertools.islice(iter_after(cron, ZoneInfo(tz), to_ms(start)), 50))
    assert got[0] > to_ms(start)
    assert all(a < b for a, b in itertools.pairwise(got))


@settings(database=None, max_examples=200, deadline=None)
@given(tz=st.sampled_from(ZONES), cron=st.sampled_from(FIXED), start=STARTS)
def test_a_fixed_time_never_fires_twice_at_one_wall_time(
    tz: str, cron: str, start: datetime
) -> None:
    zone = ZoneInfo(tz)
    got = list(itertools.islice(iter_after(cron, zone, to_ms(start)), 40))
    wall = [to_datetime(at, zone).replace(tzinfo=None) for at in got]
    assert len(set(wall)) == len(wall)


@settings(database=None, max_examples=100, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    cron=st.sampled_from(ANY),
    start=STARTS,
    span=st.integers(min_value=0, max_value=20 * DAY),
    count=st.integers(min_value=1, max_value=30),
)
def test_latest_due_is_the_tail_of_the_forward_walk(
    tz: str, cron: str, start: datetime, span: int, count: int
) -> None:
    zone = ZoneInfo(tz)
    after = to_ms(start)
    forward = []
    for at in iter_after(cron, zone, after):
        if at > after + span:
            break
        forward.append(at)
    assert latest_due(cron, zone, after, after + span, count) == forward[-count:]


def test_next_after_is_strictly_after_an_occurrence() -> None:
    at = ms(2026, 1, 1, 3)
    assert next_after("0 3 * * *", ZoneInfo("UTC"), at) == at + DAY


# -- the catch-up plan ------------------------------------------------------------------------


class Empty(BaseModel):
    """The input of the planned task's job."""


async def _noop(ctx: object, value: Empty) -> None:
    """The job a planned task fires."""


def nightly(**options: Any) -> TaskHandle:
    handle = job(_noop, tenant="none", idempotency_key=lambda v: "k")
    return task(job=handle, cron="0 * * * *", tz="UTC", input=lambda at: Empty(), **options)


START = ms(2026, 1, 1)
GRACE = 60_000


@pytest.mark.parametrize(
    ("catch_up", "plan"),
    [
        ("latest", CatchUpPlan(fires=(START + 5 * HOUR,))),
        ("skip", CatchUpPlan(arm_to=START + 5 * HOUR)),
        ("all", CatchUpPlan(fires=tuple(START + n * HOUR for n in range(1, 6)))),
    ],
)
def test_each_policy_after_downtime(catch_up: str, plan: CatchUpPlan) -> None:
    handle = nightly(catch_up=catch_up)
    assert plan_catch_up(handle, START, START + 5 * HOUR + 600_000, GRACE) == plan


@pytest.mark.parametrize("catch_up", ["latest", "skip", "all"])
def test_an_on_time_occurrence_fires_under_every_policy(catch_up: str) -> None:
    handle = nightly(catch_up=catch_up)
    now = START + HOUR + 5_000
    assert plan_catch_up(handle, START, now, GRACE) == CatchUpPlan(fires=(START + HOUR,))


def test_nothing_due_plans_nothing() -> None:
    assert plan_catch_up(nightly(), START, START + HOUR - 1, GRACE) == CatchUpPlan()


def test_all_keeps_the_newest_max_catch_up() -> None:
    handle = nightly(catch_up="all", max_catch_up=2)
    plan = plan_catch_up(handle, START, START + 10 * HOUR, GRACE)
    assert plan.fires == (START + 9 * HOUR, START + 10 * HOUR)


# -- scheduler options ------------------------------------------------------------------------


def test_the_default_renewal_is_six_per_minute() -> None:
    options = resolve_scheduler_options()
    assert (options.leader_ttl_ms, options.renew_every_ms) == (30_000, 10_000)


@pytest.mark.parametrize(
    ("knobs", "named"),
    [
        ({"renew_every": timedelta(seconds=20)}, "renew_every"),
        ({"leader_ttl": timedelta(0)}, "leader_ttl"),
        ({"misfire_grace": float("nan")}, "misfire_grace"),
        ({"drain_timeout": timedelta(seconds=-1)}, "drain_timeout"),
    ],
)
def test_a_bad_scheduler_option_is_refused_by_name(knobs: dict[str, Any], named: str) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        resolve_scheduler_options(**knobs)
    assert named in caught.value.message
