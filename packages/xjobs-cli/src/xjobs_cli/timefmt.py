"""Times as an operator reads them: ISO 8601 instants in UTC and short ages ("3m12s")."""

from __future__ import annotations

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
