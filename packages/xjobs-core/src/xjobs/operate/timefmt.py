"""Times as an operator reads and writes them: ISO 8601 instants in UTC, short ages ("3m12s"),
and spans typed as `90s`, `15m` or `1h30m`."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def iso(ms: int | None) -> str:
    """An epoch-ms instant as ISO 8601 in UTC to the second (`-` for none)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def span(ms: int) -> str:
    """A non-negative span in its largest unit and the next: `45s`, `3m12s`, `2h5m`, `4d1h`."""
    seconds = max(ms, 0) // 1000
    i = next((i for i, (_, size) in enumerate(_UNITS) if seconds >= size), len(_UNITS) - 1)
    unit, size = _UNITS[i]
    text = f"{seconds // size}{unit}"
    if i + 1 < len(_UNITS):
        finer, finer_size = _UNITS[i + 1]
        rest = seconds % size // finer_size
        if rest:
            text += f"{rest}{finer}"
    return text


def age(ms: int | None, now_ms: int) -> str:
    """How long ago `ms` was (`in 5m` for a future instant; `-` for none)."""
    if ms is None:
        return "-"
    if ms > now_ms:
        return f"in {span(ms - now_ms)}"
    return f"{span(now_ms - ms)} ago"


_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_span(text: str) -> int:
    """`90s`, `15m`, `1h`, `7d`, `2w`, or a sum of them (`1h30m`), as a positive number of ms.

    Raises `ValueError` with a message for the reader; each surface wraps it in its own refusal.
    """
    compact = text.strip().lower()
    parts = _DURATION.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ValueError(f"{text!r} is not a duration; write e.g. 90s, 15m, 1h, 7d or 1h30m")
    total = sum(int(n) * _UNIT_MS[u] for n, u in parts)
    if total <= 0:
        raise ValueError(f"{text!r} is empty; a duration must be positive")
    return total
