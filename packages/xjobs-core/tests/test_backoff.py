"""The retry curve (exponential, capped, jittered on the upper half) and the retry decision (backoff.py, retry.py)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xjobs.backoff import backoff_delay_ms
from xjobs.declare.retry import Retry, is_final_attempt, is_terminal_error
from xjobs.errors import InputInvalidError, KeyUnderivableError, Terminal

# No example database: property tests leave nothing behind in the working tree.
PROPERTY = settings(database=None, max_examples=300, deadline=None)

attempts = st.integers(min_value=1, max_value=200)
bases = st.integers(min_value=0, max_value=3_600_000)
caps = st.integers(min_value=0, max_value=86_400_000)
unit = st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False)


class FixedRandom(random.Random):
    """A `Random` whose every draw is one given value, to read the curve at one jitter."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def ceiling_of(attempt: int, base_ms: int, cap_ms: int) -> int:
    """The un-jittered curve: the highest delay the rule allows for this attempt."""
    return min(cap_ms, base_ms * int(2 ** (attempt - 1)))


@PROPERTY
@given(attempt=attempts, base_ms=bases, cap_ms=caps, r=unit)
def test_a_delay_lies_in_the_upper_half_of_its_ceiling(
    attempt: int, base_ms: int, cap_ms: int, r: float
) -> None:
    ceiling = ceiling_of(attempt, base_ms, cap_ms)
    delay = backoff_delay_ms(attempt, base_ms, cap_ms, rand=FixedRandom(r))
    assert ceiling // 2 <= delay <= ceiling


@PROPERTY
@given(attempt=attempts, base_ms=bases, cap_ms=caps, seed=st.integers())
def test_a_delay_is_never_above_the_cap(attempt: int, base_ms: int, cap_ms: int, seed: int) -> None:
    delay = backoff_delay_ms(attempt, base_ms, cap_ms, rand=random.Random(seed))
    assert 0 <= delay <= cap_ms


@PROPERTY
@given(attempt=attempts, base_ms=bases, cap_ms=caps)
def test_a_delay_is_a_whole_number_of_milliseconds(attempt: int, base_ms: int, cap_ms: int) -> None:
    assert isinstance(backoff_delay_ms(attempt, base_ms, cap_ms), int)


@PROPERTY
@given(attempt=attempts, base_ms=bases, cap_ms=caps, r=unit)
def test_the_ceiling_never_decreases_from_one_attempt_to_the_next(
    attempt: int, base_ms: int, cap_ms: int, r: float
) -> None:
    # At one jitter value the delay is a monotone function of the ceiling, so the curve read at
    # a fixed draw must never fall from attempt n to attempt n + 1.
    here = backoff_delay_ms(attempt, base_ms, cap_ms, rand=FixedRandom(r))
    then = backoff_delay_ms(attempt + 1, base_ms, cap_ms, rand=FixedRandom(r))
    assert here <= then


@PROPERTY
@given(attempt=attempts, base_ms=st.integers(min_value=1, max_value=3_600_000), cap_ms=caps)
def test_the_highest_draw_reaches_close_to_the_ceiling(
    attempt: int, base_ms: int, cap_ms: int
) -> None:
    ceiling = ceiling_of(attempt, base_ms, cap_ms)
    delay = backoff_delay_ms(attempt, base_ms, cap_ms, rand=FixedRandom(0.999_999_999))
    assert ceiling - 1 <= delay <= ceiling


@PROPERTY
@given(base_ms=st.integers(min_value=1, max_value=10_000), cap_ms=st.integers(min_value=1))
def test_a_huge_attempt_number_stays_capped(base_ms: int, cap_ms: int) -> None:
    delay = backoff_delay_ms(10**9, base_ms, cap_ms, rand=FixedRandom(0.5))
    assert delay <= cap_ms


def test_the_curve_doubles_from_the_base_until_the_cap() -> None:
    top = FixedRandom(0.999_999_999)
    assert [backoff_delay_ms(n, 1000, 10_000, rand=top) for n in range(1, 7)] == [
        999,
        1999,
        3999,
        7999,
        9999,
        9999,
    ]


def test_the_lowest_draw_is_half_the_ceiling() -> None:
    assert backoff_delay_ms(3, 1000, 60_000, rand=FixedRandom(0.0)) == 2000


def test_a_zero_base_retries_immediately() -> None:
    assert backoff_delay_ms(5, 0, 60_000) == 0


@pytest.mark.parametrize("attempt", [0, -3])
def test_an_attempt_before_the_first_reads_as_the_first(attempt: int) -> None:
    top = FixedRandom(0.0)
    assert backoff_delay_ms(attempt, 1000, 60_000, rand=top) == backoff_delay_ms(
        1, 1000, 60_000, rand=top
    )


# -- Retry -----------------------------------------------------------------------------------


def test_retry_resolves_its_durations_to_milliseconds_once() -> None:
    retry = Retry(attempts=3, base=timedelta(seconds=2), cap=timedelta(minutes=1))
    assert (retry.attempts, retry.base_ms, retry.cap_ms) == (3, 2000, 60_000)


def test_retry_defaults() -> None:
    retry = Retry()
    assert (retry.attempts, retry.base_ms, retry.cap_ms, retry.dead_letter) == (
        5,
        1000,
        600_000,
        True,
    )


def test_retry_is_immutable() -> None:
    retry = Retry()
    with pytest.raises(AttributeError):
        retry.attempts = 9  # type: ignore[misc]


@PROPERTY
@given(attempt=attempts)
def test_a_retry_delay_follows_its_own_curve(attempt: int) -> None:
    retry = Retry(attempts=5, base=timedelta(seconds=1), cap=timedelta(seconds=30))
    assert retry.delay_ms(attempt) <= 30_000


def test_the_final_attempt_is_the_declared_number() -> None:
    retry = Retry(attempts=3)
    assert [is_final_attempt(retry, n) for n in (1, 2, 3, 4)] == [False, False, True, True]


def test_a_single_attempt_is_final_from_the_start() -> None:
    assert is_final_attempt(Retry(attempts=1), 1)


def test_terminal_fails_for_good() -> None:
    assert is_terminal_error(Terminal("gone"))


def test_a_bad_input_fails_for_good() -> None:
    assert is_terminal_error(InputInvalidError("bad"))


def test_an_error_whose_class_says_terminal_fails_for_good() -> None:
    class Gone(Exception):
        terminal = True

    assert is_terminal_error(Gone())


def test_an_ordinary_error_is_retried() -> None:
    assert not is_terminal_error(RuntimeError("flaky"))
    assert not is_terminal_error(KeyUnderivableError("x"))


def test_only_a_true_terminal_flag_counts() -> None:
    class Truthy(Exception):
        terminal = "yes"

    assert not is_terminal_error(Truthy())
