"""The one-serialization encode of a plain model answers as the full check does: same text, same refusals (payload.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, PlainSerializer, field_serializer, field_validator

from xjobs.errors import PayloadInvalidError
from xjobs.payload import MAX_PAYLOAD_DEPTH, check_json_values, encode_payload, is_plain


class Numbered(BaseModel):
    i: int
    sent_at: float


class Line(BaseModel):
    text: str
    count: int | None = None
    scores: list[float] = []
    tags: tuple[str, ...] = ()
    items: list[Numbered] = []

    @field_validator("text")
    @classmethod
    def _kept(cls, value: str) -> str:
        return value


class Chain(BaseModel):
    next: Chain | None = None
    label: str = "x"


class Mapped(BaseModel):
    tags: dict[str, str] = {}


class Untyped(BaseModel):
    value: Any = None


class Serialized(BaseModel):
    at: float

    @field_serializer("at", when_used="json")
    def _shown(self, value: float) -> float:
        return 0.0 if value != value else value


class Replaced(BaseModel):
    at: Annotated[float, PlainSerializer(lambda value: 1.0)]


class Dated(BaseModel):
    at: datetime


class Outer(BaseModel):
    inner: Serialized


def full_check(value: BaseModel) -> str:
    """The reference: the Python dump walked, then the JSON text (what every encode must match)."""
    check_json_values(value.model_dump(), what="payload of job 'j'")
    return value.model_dump_json()


def chain(depth: int) -> Chain:
    link = Chain()
    for _ in range(depth):
        link = Chain(next=link)
    return link


def test_typed_models_of_scalars_lists_and_models_are_plain() -> None:
    assert is_plain(Numbered)
    assert is_plain(Line)
    assert is_plain(Chain)


@pytest.mark.parametrize("model", [Mapped, Untyped, Serialized, Replaced, Dated, Outer])
def test_a_mapping_an_untyped_part_or_a_custom_serializer_is_not_plain(
    model: type[BaseModel],
) -> None:
    assert not is_plain(model)


GOOD: list[BaseModel] = [
    Numbered(i=1, sent_at=1.5),
    Numbered(i=-(2**62), sent_at=-0.0),
    Line(text="é ✓ 😀", count=3, scores=[1e300, -2.5], tags=("a", "b")),
    Line(text="a\\u0000b"),  # a backslash, not a NUL: suspect, then passed by the full check
    Line(text="null NaN Infinity \ufffd"),
    Line(text="x", items=[Numbered(i=n, sent_at=n / 3) for n in range(300)]),
    chain(MAX_PAYLOAD_DEPTH - 2),
    Numbered(i=2**12_999, sent_at=0.0),
]


@pytest.mark.parametrize("value", GOOD, ids=lambda v: type(v).__name__)
def test_the_text_is_the_full_checks_text(value: BaseModel) -> None:
    assert encode_payload(value, job="j") == full_check(value)


BAD: list[BaseModel] = [
    Numbered(i=1, sent_at=float("nan")),
    Numbered(i=1, sent_at=float("-inf")),
    Numbered(i=2**13_001, sent_at=0.0),
    Line(text="a\x00b"),
    Line(text="x", scores=[1.0, float("inf")]),
    Line(text="x", tags=("ok", "\x00")),
    Line(text="x", items=[Numbered(i=1, sent_at=float("nan"))]),
    chain(MAX_PAYLOAD_DEPTH + 5),
]


@pytest.mark.parametrize("value", BAD, ids=lambda v: type(v).__name__)
def test_what_the_full_check_refuses_is_refused_with_its_message(value: BaseModel) -> None:
    with pytest.raises(PayloadInvalidError) as expected:
        full_check(value)
    with pytest.raises(PayloadInvalidError) as caught:
        encode_payload(value, job="j")
    assert caught.value.code == "XJOBS_PAYLOAD_INVALID"
    assert caught.value.message == expected.value.message


def test_a_lone_surrogate_assigned_after_validation_is_refused() -> None:
    line = Line(text="x")
    line.text = "\ud800"
    with pytest.raises(PayloadInvalidError, match="lone surrogate"):
        encode_payload(line, job="j")


def test_a_value_its_field_does_not_type_takes_the_full_check() -> None:
    numbered = Numbered(i=1, sent_at=0.0)
    numbered.i = float("inf")  # type: ignore[assignment]  # no validate_assignment
    with (
        pytest.warns(UserWarning, match="Expected"),
        pytest.raises(PayloadInvalidError, match="inf"),
    ):
        encode_payload(numbered, job="j")


def test_a_custom_serializer_is_judged_by_the_python_dump() -> None:
    # the JSON text would show 0.0, the Python dump holds NaN: refused as before
    with pytest.raises(PayloadInvalidError, match="nan"):
        encode_payload(Serialized(at=float("nan")), job="j")


class Dumped(BaseModel):
    at: float

    def model_dump_json(self, **options: Any) -> str:
        return '{"at":"own"}'


def test_an_overridden_dump_keeps_the_full_check_and_its_text() -> None:
    assert not is_plain(Dumped)
    assert encode_payload(Dumped(at=1.0), job="j") == '{"at":"own"}'
