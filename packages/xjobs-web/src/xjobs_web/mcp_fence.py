"""Marks what a job, its input or its errors wrote (possibly an attacker) in an MCP tool's answer:
each such field moves under `untrusted_data` in the object that held it, so an assistant reads it
as data, never as instructions."""

from __future__ import annotations

from typing import Any

UNTRUSTED = "untrusted_data"
# Fields whose text comes from a job's input, its code's output or its errors, never from xjobs:
# the input, the tenant and idempotency key derived from it, the actor and trace it came with,
# an error's message and traceback, a step's result and error, a cancel's reason.
WRITTEN_BY_JOBS = frozenset(
    {
        "input",
        "tenant",
        "idempotency_key",
        "enqueued_by",
        "traceparent",
        "last_error",
        "message",
        "traceback",
        "result",
        "error",
        "reason",
    }
)


def fenced(value: Any) -> Any:
    """`value` with every field of `WRITTEN_BY_JOBS`, at any depth, moved under its object's
    `untrusted_data`."""
    if isinstance(value, list):
        return [fenced(item) for item in value]
    if not isinstance(value, dict):
        return value
    kept: dict[str, Any] = {}
    marked: dict[str, Any] = {}
    for key, item in value.items():
        if key == UNTRUSTED and isinstance(item, dict):
            marked.update(item)  # marked by the tool itself (a field whose name is shared)
        elif key in WRITTEN_BY_JOBS:
            marked[key] = item
        else:
            kept[key] = fenced(item)
    if marked:
        kept[UNTRUSTED] = marked
    return kept
