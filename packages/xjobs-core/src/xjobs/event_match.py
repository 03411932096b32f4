"""Events as every bus takes them: the name and JSON-object checks, and the `match` rule (top-level keys, equal JSON values)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from xjobs.errors import EventInvalidError, XJobsError
from xjobs.names import validate_job_name
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES, check_json_values


def validate_event_name(name: object) -> str:
    """An event name follows the job-name rule (`order.paid`, `user-signed-up`)."""
    try:
        return validate_job_name(name, what="event")
    except XJobsError as exc:
        raise EventInvalidError(exc.message) from exc


def encode_object(value: object, *, what: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The JSON text of an event payload or a match: an object with string keys, no NUL, bounded."""
    if not isinstance(value, Mapping):
        raise EventInvalidError(
            f"{what} must be a JSON object (a mapping), got {type(value).__name__}"
        )
    if not all(isinstance(key, str) for key in value):
        raise EventInvalidError(f"{what} must have string keys only")
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EventInvalidError(f"{what} is not JSON: {exc}") from exc
    check_json_values(value, what=what)
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise EventInvalidError(f"{what} is {size} bytes, over the limit of {max_bytes}")
    return text


def json_equal(left: Any, right: Any) -> bool:
    """Deep JSON equality: numbers compare by value, a boolean is never a number, key order is moot."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and left == right


def matches(payload: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    """Whether every key of `match` is in `payload` with an equal JSON value."""
    return all(key in payload and json_equal(payload[key], value) for key, value in match.items())
