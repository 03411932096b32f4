"""A job's input as it is stored: validated by its model, encoded to JSON once, refused the same way on every backend."""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from xjobs.errors import InputInvalidError, PayloadInvalidError

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576
# What every driver stores and every run decodes alike: containers nested at most this deep, and
# integers of at most this many bits, about 3,900 decimal digits (Python refuses to parse an
# integer of more than 4,300 digits by default, so a longer one would die at run time).
MAX_PAYLOAD_DEPTH = 100
MAX_INT_BITS = 13_000


def validate_input(model: type[M], value: object, *, job: str) -> M:
    """`value` as an instance of `model`, or `InputInvalidError` naming the job and the fields."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise InputInvalidError(f"input of job {job!r} is invalid: {exc}") from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise InputInvalidError(f"input of job {job!r} cannot be validated: {exc!r}") from exc


def encode_payload(
    value: BaseModel, *, job: str, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
) -> str:
    """The JSON text stored for `value`, refused unless the run will decode exactly what was sent:
    no NUL, no lone surrogate, no NaN or infinity, no integer over `MAX_INT_BITS` bits, no
    nesting deeper than `MAX_PAYLOAD_DEPTH`, nothing JSON cannot carry, at most `max_bytes`, and,
    in a model with an untyped part (`Any`, a bare `dict`), nothing the decode would change."""
    model = type(value)
    plain = is_plain(model)
    text = _screened_text(value) if plain else None
    if text is None:
        text = _checked_text(value, job=job)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadInvalidError(
            f"payload of job {job!r} is {size} bytes, over the limit of {max_bytes}"
        )
    if not plain and is_loose(model):  # a plain model is never loose
        check_round_trip(value, text, what=f"payload of job {job!r}")
    return text


def _checked_text(value: BaseModel, *, job: str) -> str:
    """The full check: the Python values walked by `check_json_values`, then the JSON text."""
    what = f"payload of job {job!r}"
    try:
        dumped = value.model_dump()
    except (PydanticSerializationError, RecursionError, ValueError, TypeError) as exc:
        raise PayloadInvalidError(f"{what} cannot be stored as JSON: {exc}") from exc
    check_json_values(dumped, what=what)
    try:
        return value.model_dump_json()
    except (PydanticSerializationError, RecursionError, ValueError, TypeError) as exc:
        raise PayloadInvalidError(f"{what} cannot be stored as JSON: {exc}") from exc


# The text of a plain model shows every value `check_json_values` could refuse: a NUL as
# `\\u0000`, a non-finite float as `null`, `NaN` or `Infinity` (per `ser_json_inf_nan`), an
# integer over `MAX_INT_BITS` bits as more digits than `_SHORT_CHARS`, a nesting level as a
# bracket (a lone surrogate fails the serialization; U+FFFD is what a lossy one would leave).
_SHORT_CHARS = 3_900  # 2**13_000 has 3,914 digits
_FLAT_CHARS = 2 * MAX_PAYLOAD_DEPTH  # fewer chars than this hold fewer brackets than the depth
# The core schema types of a plain model: fields typed by these serialize each value as itself.
_PLAIN_TYPES = frozenset(
    {
        "model",
        "model-fields",
        "model-field",
        "definitions",
        "definition-ref",
        "default",
        "nullable",
        "union",
        "str",
        "int",
        "float",
        "bool",
        "none",
        "list",
        "tuple",
        "set",
        "frozenset",
        "function-after",
        "function-before",
        "no-info",  # the validator function of the two above, which serialize their inner schema
        "with-info",
    }
)


def _screened_text(value: BaseModel) -> str | None:
    """The JSON text of `value` in one serialization when the text alone proves what
    `check_json_values` would find in the Python dump (nothing), else `None`: the caller then
    takes the full check, which answers, and refuses, exactly as before. A suspect text (a
    `null`, a `\\u0000` inside a string) costs that full check, never a wrong answer."""
    try:
        # what `model_dump_json()` returns (`is_plain` saw it is not overridden), without its
        # wrapper; warnings="error": a value its field's type does not hold (an assignment after
        # validation, `model_construct`) is serialized by guess, so the full check judges it
        text: str = value.__pydantic_serializer__.to_json(value, warnings="error").decode()
    except Exception:  # the full check raises (or not) as it always did
        return None
    if (
        len(text) > _SHORT_CHARS
        or "\\u0000" in text
        or "null" in text
        or "NaN" in text
        or "Infinity" in text
        or "\ufffd" in text
    ):
        return None
    if len(text) >= _FLAT_CHARS and text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH:
        return None
    return text


@cache
def is_plain(model: type[BaseModel]) -> bool:
    """Whether the JSON text of `model` shows every value its `model_dump` holds, each as itself:
    no untyped part (`is_loose`), no custom serializer (`field_serializer`, `model_serializer`,
    `PlainSerializer`, a type's own), no mapping (a key is serialized lossily), only the core
    schema types of `_PLAIN_TYPES`, nested models included. Its text can then be screened
    instead of its Python dump walked; never when it overrides `model_dump` or `model_dump_json`.
    Answered once per model."""
    if is_loose(model) or _overridden(model, "model_dump") or _overridden(model, "model_dump_json"):
        return False
    try:
        schema: object = model.__pydantic_core_schema__
    except AttributeError:
        return False
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            kind = item.get("type")
            if (isinstance(kind, str) and kind not in _PLAIN_TYPES) or "serialization" in item:
                return False
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return True


def _overridden(model: type[BaseModel], method: str) -> bool:
    return getattr(model, method) is not getattr(BaseModel, method)


# -- what an untyped part keeps ---------------------------------------------------------------

JSON_TYPES = "a dict with str keys, a list, a str, an int, a float, a bool or None"
_BARE = (dict, list, tuple, set, frozenset)


@cache
def is_loose(model: type[BaseModel]) -> bool:
    """Whether `model` (or a model inside it) has a part its annotation does not type: `Any`,
    `object`, a bare container, or extra fields it keeps. Only such a part can hold a value the
    JSON decode changes (a tuple into a list, a datetime into a str); a typed field decodes back
    to its own type. Answered once per model."""
    if model.model_config.get("extra") == "allow":
        return True
    return any(_loose_annotation(f.annotation, {model}) for f in model.model_fields.values())


def _loose_annotation(annotation: object, seen: set[type]) -> bool:
    if annotation is Any or annotation is object or annotation in _BARE:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return False
        seen.add(annotation)
        if annotation.model_config.get("extra") == "allow":
            return True
        return any(_loose_annotation(f.annotation, seen) for f in annotation.model_fields.values())
    if isinstance(annotation, TypeVar):
        return True
    return any(_loose_annotation(arg, seen) for arg in typing.get_args(annotation))


def check_round_trip(value: BaseModel, text: str, *, what: str) -> None:
    """Refuse `value` unless decoding `text` gives it back unchanged, type for type.

    Inside an untyped part only JSON's own values survive the trip: a tuple would reach the body
    as a list, a set or a datetime (or a UUID, a Decimal, an enum, bytes, a model) as a list or a
    str, an int mapping key as a str. Each is `PayloadInvalidError`, naming where it is."""
    try:
        decoded = type(value).model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        raise PayloadInvalidError(f"{what} does not decode back to its model: {exc}") from exc
    first = next(_differences(value, decoded, "input"), None)
    if first is not None:
        path, sent, got = first
        raise PayloadInvalidError(
            f"{what} would reach the body changed: {path} is {_shown(sent)}, the body would get "
            f"{_shown(got)} (an untyped field keeps only JSON values: {JSON_TYPES})"
        )


def _shown(item: object) -> str:
    return f"{item!r:.60} ({type(item).__name__})"


def _differences(sent: object, got: object, path: str) -> Iterator[tuple[str, object, object]]:
    if type(sent) is not type(got):
        yield path, sent, got
    elif isinstance(sent, BaseModel):
        assert isinstance(got, BaseModel)
        for name in type(sent).model_fields:
            yield from _differences(getattr(sent, name), getattr(got, name), f"{path}.{name}")
        yield from _differences(
            sent.__pydantic_extra__ or {}, got.__pydantic_extra__ or {}, f"{path}.<extra>"
        )
    elif isinstance(sent, dict):
        assert isinstance(got, dict)
        if list(sent) != list(got):
            yield path, sent, got
        for key, item in sent.items():
            yield from _differences(item, got[key], f"{path}[{key!r}]")
    elif isinstance(sent, list | tuple):
        assert isinstance(got, list | tuple)
        if len(sent) != len(got):
            yield path, sent, got
        for n, (item, other) in enumerate(zip(sent, got, strict=False)):
            yield from _differences(item, other, f"{path}[{n}]")
    elif not _same_scalar(sent, got):
        yield path, sent, got


def _same_scalar(sent: object, got: object) -> bool:
    if isinstance(sent, float) and isinstance(got, float):  # -0.0 is not 0.0 here
        return sent == got and math.copysign(1.0, sent) == math.copysign(1.0, got)
    return bool(sent == got)


def check_json_values(value: object, *, what: str) -> None:
    """Refuse what a backend would store differently from what the run decodes: a NUL or a lone
    surrogate in any string (keys included), a non-finite float, an integer over `MAX_INT_BITS`
    bits, containers nested deeper than `MAX_PAYLOAD_DEPTH`.

    Postgres jsonb (an event's payload) rejects `\\u0000` and UTF-8 cannot carry a lone
    surrogate, while Redis would store either; JSON has no NaN (it would reach the body as `null`). Every driver refuses them
    the same way, before anything is written. The walk is iterative: any depth is refused, never
    a `RecursionError`.
    """
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list | tuple | set | frozenset):
            _check_scalar(item, what=what)
            continue
        if depth >= MAX_PAYLOAD_DEPTH:
            raise PayloadInvalidError(f"{what} is nested deeper than {MAX_PAYLOAD_DEPTH} levels")
        children: Iterable[object] = item
        if isinstance(item, dict):
            for key in item:
                _check_leaf(key, what=what)
            children = item.values()
        for child in children:
            if not _check_leaf(child, what=what):
                stack.append((child, depth + 1))


def _check_leaf(item: object, *, what: str) -> bool:
    """Check `item` if it is a JSON scalar (every payload is mostly these), answering whether it
    was one; a container takes the general walk."""
    if isinstance(item, str):
        if "\x00" in item or not item.isascii():  # an ASCII text holds no lone surrogate
            _check_string(item, what=what)
    elif isinstance(item, float):
        if not math.isfinite(item):
            _check_scalar(item, what=what)
    elif isinstance(item, int):
        if item.bit_length() > MAX_INT_BITS:
            _check_scalar(item, what=what)
    elif item is not None:
        return False
    return True


def _check_scalar(item: object, *, what: str) -> None:
    if isinstance(item, str):
        _check_string(item, what=what)
    elif isinstance(item, float) and not math.isfinite(item):
        raise PayloadInvalidError(f"{what} contains {item!r}; JSON carries finite numbers only")
    elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > MAX_INT_BITS:
        raise PayloadInvalidError(
            f"{what} contains an integer of {item.bit_length()} bits, over {MAX_INT_BITS}"
        )


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
        # the model's validator itself: what `model_validate_json` calls, one call less per run
        validated: M = model.__pydantic_validator__.validate_json(text)
    except ValidationError as exc:
        raise InputInvalidError(f"stored input of job {job!r} no longer validates: {exc}") from exc
    return validated
