"""Running a declared callable (tenant, idempotency key, concurrency key) on an input: a non-empty str or a refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xjobs.errors import KeyUnderivableError


def derive_str(fn: Callable[[Any], object], value: Any, *, what: str, job: str) -> str:
    """`fn(value)`, which must be a non-empty str; anything else is `KeyUnderivableError` naming `what`."""
    try:
        derived = fn(value)
    except Exception as exc:
        raise KeyUnderivableError(f"{what} of job {job!r} could not be derived: {exc!r}") from exc
    if not isinstance(derived, str) or not derived:
        raise KeyUnderivableError(
            f"{what} of job {job!r} must derive a non-empty str, got {derived!r}"
        )
    return derived
