"""What was DECLARED: each `backfill()` handle's spec, `is_backfill`, and `registered_backfills` over an app's jobs."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

from xjobs.declare.job import JobHandle
from xjobs.factories.backfill_spec import BackfillSpec

# Keyed by the handle's body (a handle has slots and no weak reference of its own).
_DECLARED: weakref.WeakKeyDictionary[Any, BackfillSpec] = weakref.WeakKeyDictionary()


def stamp_backfill(handle: JobHandle[Any], spec: BackfillSpec) -> None:
    """Mark `handle` as the sweep `spec` declares (once, by `backfill()`)."""
    _DECLARED[handle.fn] = spec


def backfill_spec(handle: JobHandle[Any]) -> BackfillSpec | None:
    """The sweep a handle declares, or `None` for any other job."""
    return _DECLARED.get(handle.fn)


def is_backfill(handle: JobHandle[Any]) -> bool:
    """Whether `handle` was built by `backfill()`."""
    return backfill_spec(handle) is not None


def registered_backfills(handles: Iterable[JobHandle[Any]]) -> list[BackfillSpec]:
    """The sweeps among `handles` (an app's `jobs.values()`), by name in code point order."""
    specs = [spec for h in handles if (spec := backfill_spec(h)) is not None]
    return sorted(specs, key=lambda s: s.name)
