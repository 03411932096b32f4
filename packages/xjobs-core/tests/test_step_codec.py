"""The step codec and the event `match` rule, checked without a store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from xjobs.codec import decode_result, encode_result, return_annotation
from xjobs.errors import EventInvalidError, PayloadInvalidError, StepInvalidError, Terminal
from xjobs.event_match import encode_object, json_equal, matches, validate_event_name
from xjobs.run.step_codec import encode_error, failed


class Receipt(BaseModel):
    charge_id: str
    at: datetime


async def charge() -> Receipt:
    return Receipt(charge_id="ch_1", at=datetime(2026, 1, 2, tzinfo=UTC))


def plain() -> int:
    return 3


def unannotated():  # type: ignore[no-untyped-def]
    return {"a": 1}


def test_a_pydantic_result_round_trips_through_the_return_annotation() -> None:
    annotation = return_annotation(charge)
    assert annotation is Receipt
    text = encode_result(Receipt(charge_id="ch_1", at=datetime(2026, 1, 2, tzinfo=UTC)), step="s")
    assert json.loads(text) == {"charge_id": "ch_1", "at": "2026-01-02T00:00:00Z"}
    value = decode_result(text, annotation, step="s")
    assert value == Receipt(charge_id="ch_1", at=datetime(2026, 1, 2, tzinfo=UTC))


def test_without_an_annotation_the_result_is_plain_json() -> None:
    assert return_annotation(plain) is int
    assert return_annotation(unannotated) is None
    assert return_annotation(lambda: 1) is None
    assert decode_result('{"a":1}', None, step="s") == {"a": 1}


def test_a_result_that_is_not_json_is_refused_with_the_step_named() -> None:
    with pytest.raises(StepInvalidError, match="'s'") as caught:
        encode_result(object(), step="s")
    assert caught.value.code == "XJOBS_STEP_INVALID"


def test_an_oversized_result_is_refused() -> None:
    with pytest.raises(StepInvalidError, match="over the limit"):
        encode_result("x" * (2 * 1024 * 1024), step="big")


def test_a_stored_result_that_no_longer_validates_is_a_clear_error() -> None:
    with pytest.raises(StepInvalidError, match="no longer validates"):
        decode_result('"not a receipt"', Receipt, step="charge")


def test_a_recorded_error_replays_as_the_same_step_failed_error() -> None:
    text = encode_error(Terminal("card declined"))
    error = failed("charge", text)
    assert error.code == "XJOBS_STEP_FAILED"
    assert error.terminal is True
    assert error.error_type == "Terminal"
    assert "card declined" in error.message
    assert failed("charge", encode_error(ValueError("flaky"))).terminal is False


def test_a_long_error_message_is_bounded() -> None:
    record = json.loads(encode_error(ValueError("y" * 10_000)))
    assert len(record["message"]) == 2000


@pytest.mark.parametrize(
    ("payload", "match", "expected"),
    [
        ({"order": 1, "x": 2}, {"order": 1}, True),
        ({"order": 1}, {"order": 1.0}, True),
        ({"order": 1}, {"order": "1"}, False),
        ({"flag": True}, {"flag": 1}, False),
        ({"flag": 1}, {"flag": True}, False),
        ({"tags": ["a", "b"]}, {"tags": ["a", "b"]}, True),
        ({"tags": ["a", "b"]}, {"tags": ["b", "a"]}, False),
        ({"nested": {"a": 1, "b": 2}}, {"nested": {"b": 2, "a": 1}}, True),
        ({"nested": {"a": 1, "b": 2}}, {"nested": {"a": 1}}, False),
        ({}, {"missing": None}, False),
        ({"present": None}, {"present": None}, True),
        ({"anything": 1}, {}, True),
    ],
)
def test_the_match_rule(payload: dict[str, Any], match: dict[str, Any], expected: bool) -> None:
    assert matches(payload, match) is expected


def test_json_equality_never_mixes_booleans_and_numbers() -> None:
    assert json_equal(0, False) is False
    assert json_equal(False, False) is True
    assert json_equal(2, 2.0) is True


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1, 2], "JSON object"),
        ({1: "a"}, "string keys"),
        ({"a": float("nan")}, "not JSON"),
        ({"a": object()}, "not JSON"),
    ],
)
def test_a_payload_that_is_not_a_json_object_is_refused(value: object, reason: str) -> None:
    with pytest.raises(EventInvalidError, match=reason) as caught:
        encode_object(value, what="the payload")
    assert caught.value.code == "XJOBS_EVENT_INVALID"


def test_a_nul_in_a_payload_is_refused_as_any_stored_json_is() -> None:
    with pytest.raises(PayloadInvalidError, match="NUL") as caught:
        encode_object({"a": "nul\x00"}, what="the payload")
    assert caught.value.code == "XJOBS_PAYLOAD_INVALID"


def test_an_oversized_payload_is_refused() -> None:
    with pytest.raises(EventInvalidError, match="over the limit"):
        encode_object({"a": "x" * 100}, what="the payload", max_bytes=50)


def test_event_names_follow_the_job_name_rule() -> None:
    assert validate_event_name("order.paid") == "order.paid"
    with pytest.raises(EventInvalidError) as caught:
        validate_event_name("has space")
    assert caught.value.code == "XJOBS_EVENT_INVALID"
