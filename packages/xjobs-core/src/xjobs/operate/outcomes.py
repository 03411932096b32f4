"""A counter window's outcomes per job name or queue: attempts, failure rate, completions per
minute, as `xjobs stats`, the dashboard and the MCP server show them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xjobs.contract.introspection import MINUTE_MS
from xjobs.operate.counter_sums import Window

OUTCOMES = ("completed", "retried", "dead-lettered", "dropped", "refused", "cancelled", "deferred")
# An attempt that failed; with `completed` they are the attempts that ended. A cancel is neither,
# nor is a run deferred over its rate (it never started).
FAILED = ("retried", "dead-lettered", "dropped", "refused")
UNDECLARED = "(undeclared)"


def _row(counts: dict[str, int], minutes: float) -> dict[str, Any]:
    outcomes = {o: counts.get(o, 0) for o in OUTCOMES}
    failed = sum(outcomes[o] for o in FAILED)
    attempts = failed + outcomes["completed"]
    return {
        "outcomes": outcomes,
        "attempts": attempts,
        "failure_rate": None if attempts == 0 else round(failed / attempts, 4),
        "completed_per_min": round(outcomes["completed"] / minutes, 3),
    }


def grouped(
    win: Window, key_of: dict[str, str] | None
) -> tuple[list[dict[str, Any]], Mapping[str, Any]]:
    """One row per key (job name, or queue via `key_of`), sorted, and the total row."""
    minutes = max((win.until_ms - win.start_ms) / MINUTE_MS, 1.0)
    per_key: dict[str, dict[str, int]] = {}
    total: dict[str, int] = {}
    for (name, outcome), n in win.counts.items():
        key = name if key_of is None else key_of.get(name, UNDECLARED)
        per_key.setdefault(key, {})
        per_key[key][outcome] = per_key[key].get(outcome, 0) + n
        total[outcome] = total.get(outcome, 0) + n
    rows = [{"key": key, **_row(per_key[key], minutes)} for key in sorted(per_key)]
    return rows, _row(total, minutes)
