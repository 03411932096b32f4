"""Running a declared callable (tenant, idempotency key, concurrency key) on an input: a non-empty str or a refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xjobs.errors import KeyUnderivableError, XJobsError

# A key is stored in a unique index (Postgres btree entries are bounded) and in Redis key names:
# at most this many characters, with no NUL and no lone surrogate, alike on every backend.
MAX_KEY_CHARS = 512


def derive_str(fn: Callable[[Any], object], value: Any, *, what: str, job: str) -> str:
    """`fn(value)`, which must be a non-empty str; anything else is `KeyUnderivableError` naming `what`."""
    try:
        derived = fn(value)
    except XJobsError:
        raise  # a coded refusal of the key's own (a webhook event with no org) keeps its code
    except Exception as exc:
        raise KeyUnderivableError(f"{what} of job {job!r} could not be derived: {exc!r}") from exc
    if not isinstance(derived, str) or not derived:
        raise KeyUnderivableError(
            f"{what} of job {job!r} must derive a non-empty str, got {derived!r:.80}"
        )
    if len(derived) > MAX_KEY_CHARS:
        raise KeyUnderivableError(
            f"{what} of job {job!r} is {len(derived)} characters, over {MAX_KEY_CHARS}"
        )
    if "\x00" in derived:
        raise KeyUnderivableError(f"{what} of job {job!r} contains a NUL character")
    try:
        derived.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KeyUnderivableError(f"{what} of job {job!r} contains a lone surrogate") from exc
    return derived
