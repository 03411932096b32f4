"""`task()` validates its zone, cron and catch-up once, and computes occurrences in its zone (task.py)."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from xjobs import JobHandle, TaskHandle, job, task
from xjobs.errors import (
    CronInvalidError,
    DeclarationInvalidError,
    JobDuplicateError,
    OptionInvalidError,
    TimeZoneInvalidError,
)

PARIS = ZoneInfo("Europe/Paris")


class ReportInput(BaseModel):
    day: date


async def build_report(ctx: object, input: ReportInput) -> None:
    """The job a nightly task fires."""


def report_job() -> JobHandle[Any]:
    return job(build_report, tenant="none", idempotency_key=lambda i: i.day.isoformat())


def declare(**options: Any) -> TaskHandle:
    """A nightly task in Paris unless a test overrides a part of it."""
    options.setdefault("job", report_job())
    options.setdefault("cron", "0 3 * * *")
    options.setdefault("tz", "Europe/Paris")
    options.setdefault("input", lambda occurrence: ReportInput(day=occurrence.date()))
    return task(**options)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# -- the zone --------------------------------------------------------------------------------


@pytest.mark.parametrize("tz", [None, "", 5], ids=repr)
def test_tz_is_required(tz: object) -> None:
    with pytest.raises(TimeZoneInvalidError) as caught:
        declare(tz=tz)
    assert caught.value.code == "XJOBS_TZ_INVALID"
    assert "tz" in caught.value.message


@pytest.mark.parametrize(
    "tz",
    ["Mars/Olympus", "Europe/Nowhere", "europe/paris", "../etc/passwd", "/etc/localtime", "CET+1"],
)
def test_tz_must_be_an_iana_zone(tz: str) -> None:
    with pytest.raises(TimeZoneInvalidError) as caught:
        declare(tz=tz)
    assert caught.value.code == "XJOBS_TZ_INVALID"
    assert "tz" in caught.value.message
    assert tz in caught.value.message


def test_a_task_in_paris_keeps_its_zone() -> None:
    nightly = declare()
    assert nightly.tz == "Europe/Paris"
    assert nightly.zone == PARIS
    assert nightly.cron == "0 3 * * *"
    assert nightly.catch_up == "latest"
    assert nightly.max_catch_up == 100


# -- the cron expression ---------------------------------------------------------------------


def test_a_cron_minute_out_of_range_is_refused() -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron="61 * * * *")
    assert caught.value.code == "XJOBS_CRON_INVALID"
    assert "61 * * * *" in caught.value.message


@pytest.mark.parametrize("cron", ["* * * *", "0 3 * * * *", "0"])
def test_a_cron_must_have_five_fields(cron: str) -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron=cron)
    assert caught.value.code == "XJOBS_CRON_INVALID"
    assert "five fields" in caught.value.message


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *"])
def test_a_cron_that_never_matches_is_refused(cron: str) -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron=cron)
    assert caught.value.code == "XJOBS_CRON_INVALID"
    assert "never matches" in caught.value.message


@pytest.mark.parametrize("cron", ["", "   ", None, 5], ids=repr)
def test_a_cron_must_not_be_empty(cron: object) -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron=cron)
    assert caught.value.code == "XJOBS_CRON_INVALID"
    assert "cron" in caught.value.message


@pytest.mark.parametrize(
    "cron", ["*/0 * * * *", "a b c d e", "0 25 * * *", "0 0 0 * *", "0 0 * 13 *"]
)
def test_a_cron_that_does_not_parse_is_refused(cron: str) -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron=cron)
    assert caught.value.code == "XJOBS_CRON_INVALID"
    assert "cron" in caught.value.message


def test_a_cron_that_matches_only_in_leap_years_is_valid() -> None:
    assert declare(cron="0 0 29 2 *").cron == "0 0 29 2 *"


@pytest.mark.parametrize("cron", ["@daily", "@hourly", "@weekly"])
def test_cron_macros_are_accepted(cron: str) -> None:
    assert declare(cron=cron).cron == cron


def test_the_reboot_macro_has_no_occurrence_and_is_refused() -> None:
    with pytest.raises(CronInvalidError) as caught:
        declare(cron="@reboot")
    assert caught.value.code == "XJOBS_CRON_INVALID"


def test_cron_whitespace_is_normalised() -> None:
    assert declare(cron="  0   3 * *  * ").cron == "0 3 * * *"


# -- catch-up --------------------------------------------------------------------------------


@pytest.mark.parametrize("catch_up", ["latest", "skip", "all"])
def test_catch_up_is_one_of_three_modes(catch_up: str) -> None:
    assert declare(catch_up=catch_up).catch_up == catch_up


@pytest.mark.parametrize("catch_up", ["never", "ALL", "", None, True], ids=repr)
def test_an_unknown_catch_up_is_refused(catch_up: object) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(catch_up=catch_up)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "catch_up" in caught.value.message


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, 1.5, True, 10_001], ids=repr)
def test_max_catch_up_must_be_a_positive_whole_number(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        declare(catch_up="all", max_catch_up=value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "max_catch_up" in caught.value.message


@pytest.mark.parametrize("value", [1, 10_000])
def test_max_catch_up_bounds_are_inclusive(value: int) -> None:
    assert declare(catch_up="all", max_catch_up=value).max_catch_up == value


# -- what a task fires -----------------------------------------------------------------------


def test_a_task_must_name_a_job_handle() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(job=build_report)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "job" in caught.value.message


def test_a_task_input_must_be_a_callable() -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(input=ReportInput(day=date(2026, 1, 1)))
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "input" in caught.value.message


@pytest.mark.parametrize("name", ["", "1task", "a b", "a:b"])
def test_an_invalid_task_name_is_refused(name: str) -> None:
    with pytest.raises(DeclarationInvalidError) as caught:
        declare(name=name)
    assert caught.value.code == "XJOBS_DECLARATION_INVALID"
    assert "task name" in caught.value.message


def test_a_task_builds_its_job_input_from_the_occurrence_in_its_zone() -> None:
    nightly = declare()
    # 23:30 UTC on 1 January is already 2 January in Paris.
    assert nightly.input_for(utc(2026, 1, 1, 23, 30)) == ReportInput(day=date(2026, 1, 2))


def test_an_undeclared_task_name_derives_from_its_job_until_stamped() -> None:
    nightly = declare()
    assert nightly.name == "task.build_report"
    assert not nightly.stamped


def test_a_task_name_is_stamped_once() -> None:
    nightly = declare()
    nightly.stamp("nightly")
    nightly.stamp("nightly")
    with pytest.raises(JobDuplicateError) as caught:
        nightly.stamp("other")
    assert caught.value.code == "XJOBS_JOB_DUPLICATE"
    assert "nightly" in caught.value.message
    assert "other" in caught.value.message


# -- occurrences -----------------------------------------------------------------------------


def test_the_next_occurrence_is_computed_in_the_task_zone() -> None:
    nightly = declare()
    nxt = nightly.next_occurrence(utc(2026, 1, 10, 12))
    assert nxt.tzinfo == PARIS
    assert nxt.astimezone(UTC) == utc(2026, 1, 11, 2)  # 03:00 CET


def test_the_next_occurrence_is_strictly_after_an_occurrence() -> None:
    nightly = declare()
    at = datetime(2026, 1, 11, 3, tzinfo=PARIS)
    assert nightly.next_occurrence(at).astimezone(UTC) == utc(2026, 1, 12, 2)


def test_the_occurrence_after_the_spring_change_follows_the_new_offset() -> None:
    nightly = declare()
    nxt = nightly.next_occurrence(utc(2026, 3, 28, 12))
    assert nxt.astimezone(UTC) == utc(2026, 3, 29, 1)  # 03:00 CEST


def test_occurrences_are_strictly_increasing_across_a_year() -> None:
    nightly = declare(cron="30 2 * * *")  # 02:30 falls in the spring gap and the autumn repeat
    at = utc(2026, 1, 1)
    instants = []
    for _ in range(366):
        at = nightly.next_occurrence(at)
        instants.append(at.timestamp())
    assert all(a < b for a, b in itertools.pairwise(instants))


ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
CRONS = [
    "* * * * *",
    "*/15 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "59 1 * * *",
    "0 0 1 * *",
    "@daily",
]


@settings(database=None, max_examples=150, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    cron=st.sampled_from(CRONS),
    start=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
    ),
)
def test_next_occurrence_is_strictly_increasing(tz: str, cron: str, start: datetime) -> None:
    # Compare instants, not wall times: two aware datetimes in one zone compare by wall clock,
    # which cannot tell the two 02:30s of an autumn repeat apart.
    recurring = declare(tz=tz, cron=cron)
    at = start
    for _ in range(30):
        nxt = recurring.next_occurrence(at)
        assert nxt.timestamp() > at.timestamp()
        assert nxt.timestamp() - at.timestamp() <= timedelta(days=32).total_seconds()
        at = nxt
