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
_RAND_62 = (1 << 62) - 1


def new_id() -> str:
    """A UUIDv7 (RFC 9562): 48 bits of epoch ms, a 12-bit sequence within the ms, then randomness,
    so ids sort by creation time, and those one process makes in one ms in the order it made them."""
    return _v7(time.time_ns() // 1_000_000, int.from_bytes(os.urandom(8)))


def new_id_pair() -> tuple[str, str]:
    """Two ids as two `new_id()` calls one after the other make them (a job's id and its first
    run's), from one read of the system's randomness."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(16))
    return _v7(ms, rand >> 64), _v7(ms, rand)


def _v7(now_ms: int, rand: int) -> str:
    global _last_ms, _seq
    ms = now_ms
    if _last_ms - _HOLD_MS < ms <= _last_ms:
        ms, _seq = _last_ms, _seq + 1
        if _seq > 0xFFF:  # 4,096 in one ms: borrow the next ms
            ms, _seq = ms + 1, 0
    else:
        _seq = 0
    _last_ms = ms
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | _seq << 64 | 0x2 << 62 | rand & _RAND_62
    h = value.to_bytes(16).hex()  # the canonical text, without building a uuid.UUID (hot path)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_worker_id() -> str:
    """A random id for one worker process (never a host or pod name alone)."""
    return str(uuid.uuid4())
