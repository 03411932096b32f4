"""argparse value types shared by the verbs (seconds, durations, queue and state lists) and the job filter flags."""

from __future__ import annotations

import argparse
import math
from datetime import timedelta

from xjobs.operate.timefmt import parse_span


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds that a `timedelta` can hold (the role's own
    bounds are checked by the role, with its coded refusal)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, 0 or more")
    try:
        timedelta(seconds=value)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is too many seconds") from None
    return value


def queue_list(text: str) -> list[str]:
    """`a,b` as a list of queue names (each one is validated by the worker)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def states(text: str) -> list[str]:
    """`dead,failed` as a list of states (each one is checked by the job filter)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def duration_ms(text: str) -> int:
    """`90s`, `15m`, `1h`, `7d`, `2w`, or a sum of them (`1h30m`), as a positive number of ms."""
    try:
        return parse_span(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_job_filters(parser: argparse.ArgumentParser) -> None:
    """`--queue`, `--name` and `--tenant`, each narrowing which jobs a verb reads or moves."""
    parser.add_argument("--queue", default=None, metavar="Q", help="only jobs of this queue")
    parser.add_argument("--name", default=None, metavar="N", help="only jobs of this job name")
    parser.add_argument("--tenant", default=None, metavar="T", help="only jobs of this tenant")
