"""RQ's job functions, imported by path in its worker processes."""

from __future__ import annotations

from bench import remote


def bench_job(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)


def bench_answer(i: int, sent_at: float) -> int:
    remote.ran(i, sent_at)
    return i
