"""The webhook wire format (Standard Webhooks): `whsec_` secrets, the signed headers, and `verify()` for a receiver."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final

from xjobs import errors
from xjobs.contract.webhooks import WebhookInvalidError, message_id
from xjobs.errors import XJobsError

SECRET_PREFIX: Final = "whsec_"
SIGNATURE_VERSION: Final = "v1"
DEFAULT_TOLERANCE: Final = timedelta(minutes=5)
# A new secret's key length (Standard Webhooks keys are 24 to 64 bytes).
SECRET_BYTES: Final = 32
MIN_SECRET_BYTES: Final = 24
MAX_SECRET_BYTES: Final = 64
ID_HEADER: Final = "webhook-id"
TIMESTAMP_HEADER: Final = "webhook-timestamp"
SIGNATURE_HEADER: Final = "webhook-signature"


class WebhookSignatureError(XJobsError):
    """A received webhook's headers are missing, its timestamp is outside the tolerance, or no
    signature matches any of the receiver's secrets.

    To do: Refuse the request; if it should have passed, check the shared secret and both sides'
    clocks.
    """

    code = errors.WEBHOOK_SIGNATURE


def new_secret() -> str:
    """A fresh random secret, `whsec_` then the base64 of its key."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: object) -> bytes:
    """The HMAC key a `whsec_<base64>` secret names (the prefix is optional), or `WebhookInvalidError`."""
    if not isinstance(secret, str):
        raise WebhookInvalidError("a webhook secret must be a str, `whsec_` then base64")
    text = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise WebhookInvalidError("a webhook secret must be `whsec_` then base64") from None
    if not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
        raise WebhookInvalidError(
            f"a webhook secret's key must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes, "
            f"this one is {len(key)}"
        )
    return key


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def signed_headers(
    secrets_: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers: one signature per secret, space-separated, so a
    receiver that holds either the old or the new secret of a rotation verifies."""
    message_id(msg_id)
    if not secrets_:
        raise WebhookInvalidError("a webhook needs at least one secret to sign with")
    signatures = " ".join(signature(secret_key(s), msg_id, timestamp, body) for s in secrets_)
    return {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signatures}


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookSignatureError(f"the {name} header is missing")


def _timestamp(text: str, tolerance: timedelta, now_s: float | None) -> int:
    try:
        timestamp = int(text)
    except ValueError:
        raise WebhookSignatureError(f"webhook-timestamp {text!r:.40} is not an integer") from None
    now = time.time() if now_s is None else now_s
    if abs(now - timestamp) > tolerance.total_seconds():
        raise WebhookSignatureError(
            f"webhook-timestamp {timestamp} is more than {tolerance} away from now"
        )
    return timestamp


def _matches(expected: bytes, header: str) -> bool:
    for entry in header.split(" "):
        version, _, value = entry.partition(",")
        if version != SIGNATURE_VERSION:
            continue
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            return True
    return False


def verify(
    secrets_: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    now_s: float | None = None,
) -> Any:
    """Check a received webhook and answer its JSON payload: the three headers are present, the
    timestamp is within `tolerance` of now (replays are refused), and one `v1` signature matches
    one of `secrets_` (several during a rotation). Any failure is `WebhookSignatureError`.

    `body` is the raw request body, exactly as received (never parsed and dumped again).
    """
    keys = [secret_key(s) for s in ([secrets_] if isinstance(secrets_, str) else secrets_)]
    raw = body.encode("utf-8") if isinstance(body, str) else body
    msg_id = _header(headers, ID_HEADER)
    timestamp = _timestamp(_header(headers, TIMESTAMP_HEADER), tolerance, now_s)
    given = _header(headers, SIGNATURE_HEADER)
    for key in keys:
        expected = signature(key, msg_id, timestamp, raw).partition(",")[2]
        if _matches(base64.b64decode(expected), given):
            return json.loads(raw)
    raise WebhookSignatureError("no webhook-signature matches the receiver's secrets")
