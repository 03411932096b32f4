"""A job's input as it is stored: validated by its model, encoded to JSON once, refused the same way on every backend."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from xjobs.errors import InputInvalidError, PayloadInvalidError

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576


def validate_input(model: type[M], value: object, *, job: str) -> M:
    """`value` as an instance of `model`, or `InputInvalidError` naming the job and the fields."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise InputInvalidError(f"input of job {job!r} is invalid: {exc}") from exc


def encode_payload(
    value: BaseModel, *, job: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> str:
    """The JSON text stored for `value`: no NUL, no lone surrogate, at most `max_bytes` of UTF-8."""
    check_strings(value.model_dump(), what=f"payload of job {job!r}")
    text = value.model_dump_json()
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadInvalidError(
            f"payload of job {job!r} is {size} bytes, over the limit of {max_bytes}"
        )
    return text


def check_strings(value: object, *, what: str) -> None:
    """Refuse a NUL or a lone surrogate in any string of `value`, keys included.

    Postgres jsonb rejects `\\u0000` and UTF-8 cannot carry a lone surrogate, while Redis would
    store either; every driver refuses them the same way, before anything is written.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_string(item, what=what)
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str):
                    _check_string(key, what=what)
                stack.append(child)
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)


def _check_string(text: str, *, what: str) -> None:
    if "\x00" in text:
        raise PayloadInvalidError(f"{what} contains a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PayloadInvalidError(f"{what} contains a lone surrogate") from exc


def decode_payload(text: str) -> Any:
    """The JSON value of a stored payload."""
    return json.loads(text)


def decode_input(model: type[M], text: str, *, job: str) -> M:
    """A stored payload as an instance of the job's model, or `InputInvalidError` (terminal)."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise InputInvalidError(f"stored input of job {job!r} no longer validates: {exc}") from exc
