"""The Celery app of the bench and its tasks: imported by the bench process (to send) and by the
worker process it starts (`celery -A bench.adapters.celery_tasks worker`)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery  # type: ignore[import-not-found,unused-ignore]

from bench import remote

URL_ENV = "XJOBS_BENCH_CELERY_URL"  # the broker and result backend, for the worker process
QUEUE = "bench"

app: Any = Celery("bench")


def configure(url: str) -> None:
    """Broker and result backend on the contender's Redis db; results off but where a workload
    reads them (W10's answers, W11's chord); a high prefetch, as Celery's optimizing guide advises
    for many short tasks; no events."""
    app.conf.update(
        broker_url=url,
        result_backend=url,
        task_ignore_result=True,
        task_default_queue=QUEUE,
        worker_prefetch_multiplier=64,
        worker_send_task_events=False,
        broker_connection_retry_on_startup=True,
    )


configure(os.environ.get(URL_ENV, "redis://localhost"))


def _job(i: int, sent_at: float) -> None:
    remote.ran(i, sent_at)


def _answer(i: int, sent_at: float) -> int:
    remote.ran(i, sent_at)
    return i


def _child() -> None:
    """W11: a no-op child of the chord."""


def _joined(results: list[None], sent_at: float) -> None:
    """W11: the chord's callback, once every child has run."""
    remote.ran(len(results), sent_at)


job = app.task(name="bench_job")(_job)
answer = app.task(name="bench_answer", ignore_result=False)(_answer)
child = app.task(name="bench_child", ignore_result=False)(_child)
joined = app.task(name="bench_joined")(_joined)
