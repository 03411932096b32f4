"""An untyped part of a job's input (`Any`, a bare container, kept extras) holds JSON values only:
what the decode would change is refused at the door; a typed field decodes back to its type."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest
from pydantic import BaseModel, ConfigDict

from xjobs.errors import PayloadInvalidError
from xjobs.payload import encode_payload, is_loose


class Loose(BaseModel):
    value: Any = None


class Typed(BaseModel):
    pair: tuple[int, str]
    at: datetime
    tags: frozenset[str]
    amount: Decimal


class Nested(BaseModel):
    inner: Loose | None = None
    mapping: dict[str, Any] = {}


class Bare(BaseModel):
    items: list  # type: ignore[type-arg]


class Extras(BaseModel):
    model_config = ConfigDict(extra="allow")


def test_only_a_model_with_an_untyped_part_is_loose() -> None:
    assert [is_loose(m) for m in (Loose, Typed, Nested, Bare, Extras)] == [
        True,
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ((1, "a"), "input.value is (1, 'a') (tuple)"),
        ({1, 2}, "input.value is {1, 2} (set)"),
        ({"at": datetime(2000, 1, 1, tzinfo=UTC)}, "input.value['at'] is datetime.datetime("),
        ({1: "a"}, "input.value is {1: 'a'} (dict)"),
        (uuid4(), "input.value is UUID("),
        (Decimal("1.5"), "input.value is Decimal('1.5') (Decimal)"),
        (Loose(value=1), "input.value is Loose(value=1) (Loose)"),
        ([[1, (2,)]], "input.value[0][1] is (2,) (tuple)"),
    ],
    ids=["tuple", "set", "datetime", "int key", "uuid", "decimal", "model", "deep tuple"],
)
def test_a_value_the_decode_would_change_is_refused_naming_where_it_is(
    value: object, where: str
) -> None:
    with pytest.raises(PayloadInvalidError) as refused:
        encode_payload(Loose(value=value), job="j")
    assert where in str(refused.value)


def test_json_values_in_an_untyped_part_are_stored_as_sent() -> None:
    sent = {"z": [1e300, -0.0, 1e16, 5e-324, 2**70, True, None], "a": {"b": "c"}}
    text = encode_payload(Loose(value=sent), job="j")
    assert json.loads(text)["value"] == sent
    assert Loose.model_validate_json(text).value["z"][1] == -0.0
    assert str(Loose.model_validate_json(text).value["z"][1]) == "-0.0"


def test_typed_fields_decode_back_to_their_type_and_are_accepted() -> None:
    value = Typed(
        pair=(1, "a"), at=datetime(2000, 1, 1, tzinfo=UTC), tags=frozenset("xy"), amount="1.5"
    )
    assert Typed.model_validate_json(encode_payload(value, job="j")) == value


def test_untyped_parts_inside_a_typed_model_are_checked_too() -> None:
    with pytest.raises(PayloadInvalidError, match=r"input\.inner\.value is \(1,\)"):
        encode_payload(Nested(inner=Loose(value=(1,))), job="j")
    with pytest.raises(PayloadInvalidError, match=r"input\.mapping\['k'\] is \{1\}"):
        encode_payload(Nested(mapping={"k": {1}}), job="j")
    with pytest.raises(PayloadInvalidError, match=r"input\.items\[0\] is \(1,\)"):
        encode_payload(Bare(items=[(1,)]), job="j")
    with pytest.raises(PayloadInvalidError, match=r"input\.<extra>\['t'\] is \(1,\)"):
        encode_payload(Extras(t=(1,)), job="j")
