"""The retry curve: exponential from a base, capped, with full jitter on the upper half."""

from __future__ import annotations

import random


def backoff_delay_ms(
    attempt: int, base_ms: int, cap_ms: int, *, rand: random.Random | None = None
) -> int:
    """The delay before retry number `attempt` (1-based): `base * 2**(attempt-1)`, capped, jittered in [d/2, d]."""
    exponent = min(max(attempt - 1, 0), 62)
    ceiling = min(cap_ms, base_ms * (1 << exponent))
    if ceiling <= 0:
        return 0
    half = ceiling // 2
    r = (rand or random).random()
    return half + int((ceiling - half) * r)
