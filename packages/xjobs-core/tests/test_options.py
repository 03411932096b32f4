"""Every numeric knob is refused when not finite or out of range, naming the option (options.py)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from xjobs.errors import OptionInvalidError
from xjobs.options import duration_ms, finite_count, finite_option, optional_duration_ms

NOT_A_NUMBER = [None, "1", b"1", [1], True, False, timedelta(seconds=1)]
NOT_FINITE = [math.nan, math.inf, -math.inf]


# -- finite_option ---------------------------------------------------------------------------


def test_finite_option_answers_a_float() -> None:
    assert finite_option("ratio", 3) == 3.0
    assert isinstance(finite_option("ratio", 3), float)
    assert finite_option("ratio", 0.25) == 0.25


@pytest.mark.parametrize("value", NOT_A_NUMBER, ids=repr)
def test_finite_option_refuses_what_is_not_a_number(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_option("ratio", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "ratio" in caught.value.message


@pytest.mark.parametrize("value", NOT_FINITE, ids=repr)
def test_finite_option_refuses_nan_and_infinities(value: float) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_option("ratio", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "ratio" in caught.value.message
    assert "finite" in caught.value.message


def test_finite_option_refuses_an_int_too_large_to_be_a_finite_number() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_option("ratio", 10**400)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "ratio" in caught.value.message


def test_finite_option_refuses_below_the_minimum() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_option("ratio", -0.5, minimum=0)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "ratio" in caught.value.message
    assert "at least" in caught.value.message


def test_finite_option_refuses_above_the_maximum() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_option("ratio", 1.5, maximum=1)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "ratio" in caught.value.message
    assert "at most" in caught.value.message


def test_finite_option_bounds_are_inclusive() -> None:
    assert finite_option("ratio", 0, minimum=0, maximum=1) == 0.0
    assert finite_option("ratio", 1, minimum=0, maximum=1) == 1.0


# -- finite_count ----------------------------------------------------------------------------


def test_finite_count_answers_an_int() -> None:
    assert finite_count("limit", 7) == 7
    assert isinstance(finite_count("limit", 7.0), int)
    assert finite_count("limit", 7.0) == 7


def test_finite_count_accepts_zero_by_default_as_a_hard_stop() -> None:
    assert finite_count("limit", 0) == 0


@pytest.mark.parametrize("value", NOT_A_NUMBER, ids=repr)
def test_finite_count_refuses_what_is_not_a_number(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_count("limit", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "limit" in caught.value.message


@pytest.mark.parametrize("value", [*NOT_FINITE, 1.5, 0.1, -2.5], ids=repr)
def test_finite_count_refuses_a_non_finite_or_fractional_number(value: float) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_count("limit", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "limit" in caught.value.message


def test_finite_count_refuses_below_the_minimum() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_count("limit", -1)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "limit" in caught.value.message


def test_finite_count_refuses_below_a_raised_minimum() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_count("attempts", 0, minimum=1)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "attempts" in caught.value.message


def test_finite_count_refuses_above_the_maximum() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        finite_count("limit", 11, maximum=10)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "limit" in caught.value.message


def test_finite_count_bounds_are_inclusive() -> None:
    assert finite_count("limit", 1, minimum=1, maximum=10) == 1
    assert finite_count("limit", 10, minimum=1, maximum=10) == 10


# -- duration_ms -----------------------------------------------------------------------------


def test_duration_ms_turns_a_timedelta_into_whole_milliseconds() -> None:
    assert duration_ms("timeout", timedelta(seconds=1.5)) == 1500
    assert duration_ms("timeout", timedelta(minutes=10)) == 600_000
    assert isinstance(duration_ms("timeout", timedelta(seconds=1)), int)


def test_duration_ms_reads_a_bare_number_as_seconds() -> None:
    assert duration_ms("timeout", 2) == 2000
    assert duration_ms("timeout", 0.25) == 250


@pytest.mark.parametrize("value", [None, "5s", True, [5]], ids=repr)
def test_duration_ms_refuses_what_is_not_a_duration(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message


@pytest.mark.parametrize("value", NOT_FINITE, ids=repr)
def test_duration_ms_refuses_nan_and_infinities(value: float) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message


def test_duration_ms_refuses_an_int_too_large_to_be_a_finite_number() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", 10**400)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message


@pytest.mark.parametrize("value", [timedelta(0), 0, 0.0], ids=repr)
def test_duration_ms_refuses_zero_unless_allowed(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", value)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message
    assert duration_ms("delay", value, allow_zero=True) == 0


@pytest.mark.parametrize("value", [timedelta(seconds=-1), -1, -0.5], ids=repr)
def test_duration_ms_refuses_a_negative_duration(value: object) -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", value, allow_zero=True)
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message


def test_duration_ms_refuses_a_duration_that_rounds_to_zero() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        duration_ms("timeout", timedelta(microseconds=400))
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "timeout" in caught.value.message


def test_duration_ms_allows_a_signed_offset_when_not_required_positive() -> None:
    assert duration_ms("offset", timedelta(seconds=-2), positive=False) == -2000


def test_optional_duration_ms_reads_none_as_not_set() -> None:
    assert optional_duration_ms("timeout", None) is None
    assert optional_duration_ms("timeout", timedelta(seconds=3)) == 3000


def test_optional_duration_ms_still_refuses_a_bad_value() -> None:
    with pytest.raises(OptionInvalidError) as caught:
        optional_duration_ms("step_timeout", timedelta(0))
    assert caught.value.code == "XJOBS_OPTION_INVALID"
    assert "step_timeout" in caught.value.message
