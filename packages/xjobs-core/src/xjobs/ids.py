"""Identifiers: time-ordered UUIDv7 strings for jobs and runs, random UUIDs for worker processes."""

from __future__ import annotations

import os
import time
import uuid


def new_id() -> str:
    """A UUIDv7 (RFC 9562): 48 bits of epoch ms then randomness, so ids sort by creation time."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | rand & ((1 << 80) - 1)
    value = value & ~(0xF << 76) | (0x7 << 76)  # version 7
    value = value & ~(0x3 << 62) | (0x2 << 62)  # RFC 4122 variant
    h = f"{value:032x}"  # the canonical text, without building a uuid.UUID on the hot path
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_worker_id() -> str:
    """A random id for one worker process (never a host or pod name alone)."""
    return str(uuid.uuid4())
