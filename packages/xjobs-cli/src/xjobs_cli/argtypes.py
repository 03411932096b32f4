"""argparse value types shared by the verbs: seconds and comma-separated queue lists."""

from __future__ import annotations

import argparse
import math


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, 0 or more")
    return value


def queue_list(text: str) -> list[str]:
    """`a,b` as a list of queue names (each one is validated by the worker)."""
    return [name.strip() for name in text.split(",") if name.strip()]
