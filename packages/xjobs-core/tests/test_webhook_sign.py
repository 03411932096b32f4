"""The webhook wire format: Standard Webhooks signatures, secrets and `verify()` (factories/webhook_sign.py)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from xjobs.contract.webhooks import WebhookInvalidError
from xjobs.factories import WebhookSignatureError, new_secret, verify
from xjobs.factories.webhook_sign import secret_key, signature, signed_headers

# The Standard Webhooks reference library's own test vector (libraries/python/tests).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
BODY = b'{"type":"invoice.paid","data":{"n":1}}'


def test_the_signature_matches_the_specs_test_vector() -> None:
    key = secret_key(SPEC_SECRET)
    assert signature(key, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_the_spec_vector_verifies_at_its_own_time_with_or_without_the_prefix() -> None:
    headers = {
        "webhook-id": SPEC_ID,
        "webhook-timestamp": str(SPEC_TIMESTAMP),
        "webhook-signature": SPEC_SIGNATURE,
    }
    for secret in (SPEC_SECRET, SPEC_SECRET.removeprefix("whsec_")):
        assert verify(secret, headers, SPEC_BODY, now_s=SPEC_TIMESTAMP) == {"test": 2432232314}


def test_signed_headers_verify_and_answer_the_payload() -> None:
    secret = new_secret()
    headers = signed_headers([secret], "msg_1", int(time.time()), BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert verify(secret, headers, BODY) == {"type": "invoice.paid", "data": {"n": 1}}


def test_header_names_are_read_in_any_case() -> None:
    secret = new_secret()
    headers = signed_headers([secret], "msg_1", int(time.time()), BODY)
    assert verify(secret, {k.title(): v for k, v in headers.items()}, BODY.decode()) is not None


def test_a_rotation_signs_with_every_secret_so_either_side_verifies() -> None:
    old, new = new_secret(), new_secret()
    headers = signed_headers([new, old], "msg_1", int(time.time()), BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verify(old, headers, BODY) == verify(new, headers, BODY) == verify([new], headers, BODY)


def test_another_secret_a_tampered_body_or_a_changed_id_is_refused() -> None:
    secret = new_secret()
    headers = signed_headers([secret], "msg_1", int(time.time()), BODY)
    with pytest.raises(WebhookSignatureError):
        verify(new_secret(), headers, BODY)
    with pytest.raises(WebhookSignatureError):
        verify(secret, headers, BODY.replace(b"1", b"2"))
    with pytest.raises(WebhookSignatureError):
        verify(secret, {**headers, "webhook-id": "msg_2"}, BODY)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_refused(missing: str) -> None:
    secret = new_secret()
    headers = signed_headers([secret], "msg_1", int(time.time()), BODY)
    del headers[missing]
    with pytest.raises(WebhookSignatureError) as refused:
        verify(secret, headers, BODY)
    assert refused.value.code == "XJOBS_WEBHOOK_SIGNATURE_INVALID"


@pytest.mark.parametrize("skew_s", [-301, 301])
def test_a_timestamp_outside_the_tolerance_is_refused(skew_s: int) -> None:
    secret, now = new_secret(), int(time.time())
    headers = signed_headers([secret], "msg_1", now + skew_s, BODY)
    with pytest.raises(WebhookSignatureError):
        verify(secret, headers, BODY, now_s=now)
    assert verify(secret, headers, BODY, now_s=now, tolerance=timedelta(minutes=6)) is not None


def test_an_unreadable_timestamp_or_signature_entry_is_refused() -> None:
    secret = new_secret()
    headers = signed_headers([secret], "msg_1", int(time.time()), BODY)
    with pytest.raises(WebhookSignatureError):
        verify(secret, {**headers, "webhook-timestamp": "soon"}, BODY)
    with pytest.raises(WebhookSignatureError):
        verify(secret, {**headers, "webhook-signature": "v2,abc v1,!!!"}, BODY)


@pytest.mark.parametrize("secret", ["whsec_!!!", "whsec_c2hvcnQ=", 42, "whsec_" + "A" * 200])
def test_a_malformed_secret_is_refused(secret: object) -> None:
    with pytest.raises(WebhookInvalidError) as refused:
        secret_key(secret)
    assert refused.value.code == "XJOBS_WEBHOOK_INVALID"


def test_a_new_secret_is_a_whsec_secret_of_its_own() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_")
    assert first != second
    assert len(secret_key(first)) == 32


def test_signing_needs_a_secret_and_a_valid_message_id() -> None:
    with pytest.raises(WebhookInvalidError):
        signed_headers([], "msg_1", 1, BODY)
    with pytest.raises(WebhookInvalidError):
        signed_headers([new_secret()], "msg 1", 1, BODY)
