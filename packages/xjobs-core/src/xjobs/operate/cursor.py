"""The opaque keyset cursor of a job list: the last row's position, bound to the filter it paged."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import astuple

from xjobs.contract.introspection import JobFilter, JobPosition
from xjobs.errors import JobPageInvalidError

CURSOR_VERSION = 1
MAX_CURSOR_CHARS = 512


def _digest(where: JobFilter) -> str:
    """A short digest of the filter: a cursor replayed under another filter is foreign."""
    return hashlib.sha256(repr(astuple(where)).encode()).hexdigest()[:12]


def encode_cursor(position: JobPosition, where: JobFilter) -> str:
    """`position` as an opaque URL-safe string for the page after it, under `where`."""
    raw = json.dumps([CURSOR_VERSION, _digest(where), position.created_at_ms, position.id])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, where: JobFilter) -> JobPosition:
    """The position a cursor names; a garbled, foreign or other-version cursor is refused."""
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise JobPageInvalidError("the cursor is empty or too long; pass the one a page answered")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, digest, created_at_ms, job_id = json.loads(raw)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise JobPageInvalidError(f"the cursor {cursor[:40]!r} is not one a page answered") from exc
    if version != CURSOR_VERSION:
        raise JobPageInvalidError(f"the cursor is of version {version!r}; this xjobs reads 1")
    if digest != _digest(where):
        raise JobPageInvalidError(
            "the cursor belongs to another filter; page with the filter it was answered for"
        )
    if (
        not isinstance(created_at_ms, int)
        or isinstance(created_at_ms, bool)
        or not isinstance(job_id, str)
        or not job_id
        or len(job_id) > 64
    ):
        raise JobPageInvalidError("the cursor's position is malformed")
    return JobPosition(created_at_ms, job_id)
