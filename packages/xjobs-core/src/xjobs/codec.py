"""A returned value as stored JSON, and back through the function's return annotation (steps, results)."""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Callable
from typing import Any

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from xjobs.errors import StepInvalidError
from xjobs.payload import DEFAULT_MAX_PAYLOAD_BYTES


def encode_result(value: object, *, step: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str:
    """The JSON text of a step's result (pydantic models, dataclasses, dates… as pydantic dumps them)."""
    try:
        text = pydantic_core.to_json(value).decode("utf-8")
    except (pydantic_core.PydanticSerializationError, UnicodeDecodeError) as exc:
        raise StepInvalidError(
            f"the result of step {step!r} cannot be stored as JSON: {exc}"
        ) from exc
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise StepInvalidError(
            f"the result of step {step!r} is {size} bytes, over the limit of {max_bytes}"
        )
    return text


@functools.lru_cache(maxsize=256)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def return_annotation(fn: Callable[..., Any]) -> Any:
    """`fn`'s declared return type, or `None` when it declares none (or it cannot be resolved)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return None
    annotation = hints.get("return")
    if annotation is None or annotation is Any:
        return None
    origin = typing.get_origin(annotation)
    if origin is not None and getattr(origin, "__name__", "") in ("Coroutine", "Awaitable"):
        args = typing.get_args(annotation)
        return args[-1] if args else None
    return annotation


def decode_result(text: str, annotation: Any, *, step: str) -> Any:
    """A stored result as the step returns it: validated into `annotation` when there is one, else plain JSON."""
    if annotation is None:
        return json.loads(text)
    try:
        return _adapter(annotation).validate_json(text)
    except (ValidationError, TypeError) as exc:
        raise StepInvalidError(
            f"the stored result of step {step!r} no longer validates as {annotation!r}: {exc}"
        ) from exc
