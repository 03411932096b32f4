"""Validation of every numeric knob: refused when not finite or out of range, naming the option."""

from __future__ import annotations

import math
from datetime import timedelta

from xjobs.errors import OptionInvalidError


def _as_float(name: str, value: int | float) -> float:
    try:
        return float(value)
    except OverflowError as exc:
        raise OptionInvalidError(
            f"{name} must be finite, got an integer too large for a float"
        ) from exc


def finite_option(
    name: str, value: object, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """A finite real number inside `[minimum, maximum]`, or `OptionInvalidError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionInvalidError(f"{name} must be a number, got {value!r}")
    number = _as_float(name, value)
    if not math.isfinite(number):
        raise OptionInvalidError(f"{name} must be finite, got {value!r}")
    if minimum is not None and number < minimum:
        raise OptionInvalidError(f"{name} must be at least {minimum:g}, got {value!r}")
    if maximum is not None and number > maximum:
        raise OptionInvalidError(f"{name} must be at most {maximum:g}, got {value!r}")
    return number


def finite_count(name: str, value: object, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A whole number at least `minimum` (zero is a hard stop where it is allowed, never 'unlimited')."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionInvalidError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise OptionInvalidError(f"{name} must be a finite whole number, got {value!r}")
    count = int(value)
    if count < minimum:
        raise OptionInvalidError(f"{name} must be at least {minimum}, got {value!r}")
    if maximum is not None and count > maximum:
        raise OptionInvalidError(f"{name} must be at most {maximum}, got {value!r}")
    return count


def duration_ms(
    name: str, value: object, *, positive: bool = True, allow_zero: bool = False
) -> int:
    """A `timedelta` (or a number of seconds) as whole milliseconds, refused when not finite or out of range."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = _as_float(name, value)
    else:
        raise OptionInvalidError(f"{name} must be a timedelta, got {value!r}")
    if not math.isfinite(seconds):
        raise OptionInvalidError(f"{name} must be finite, got {value!r}")
    ms = round(seconds * 1000)
    if positive and (ms < 0 or (ms == 0 and not allow_zero)):
        raise OptionInvalidError(f"{name} must be positive, got {value!r}")
    return ms


def optional_duration_ms(name: str, value: object | None) -> int | None:
    """`duration_ms` for an option where `None` means 'not set'."""
    return None if value is None else duration_ms(name, value)
