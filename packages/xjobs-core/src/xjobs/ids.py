"""Identifiers: time-ordered UUIDv7 strings for jobs and runs, random UUIDs for worker processes."""

from __future__ import annotations

import os
import time
import uuid

# The last id's ms and its 12-bit sequence (RFC 9562 method 1): ids of one process strictly increase.
_last_ms = 0
_seq = 0
# A wall clock stepped back by less than this keeps the last ms (and the order); more starts afresh.
_HOLD_MS = 1_000


def new_id() -> str:
    """A UUIDv7 (RFC 9562): 48 bits of epoch ms, a 12-bit sequence within the ms, then randomness,
    so ids sort by creation time, and those one process makes in one ms in the order it made them."""
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if _last_ms - _HOLD_MS < ms <= _last_ms:
        ms, _seq = _last_ms, _seq + 1
        if _seq > 0xFFF:  # 4,096 in one ms: borrow the next ms
            ms, _seq = ms + 1, 0
    else:
        _seq = 0
    _last_ms = ms
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | _seq << 64 | 0x2 << 62 | rand
    h = f"{value:032x}"  # the canonical text, without building a uuid.UUID on the hot path
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_worker_id() -> str:
    """A random id for one worker process (never a host or pod name alone)."""
    return str(uuid.uuid4())
