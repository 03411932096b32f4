"""The backend in this process: enqueue checks, the transaction, the async API, unknown ids, the
priority order and the OPTIONS it refuses."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import transaction
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.utils import timezone
from shop.models import Order
from shop.tasks import mark_paid, send_receipt

from xjobs.errors import OptionInvalidError
from xjobs_django import XJobsBackend, run_worker
from xjobs_django.options import read_options
from xjobs_django.priority import xjobs_priority


def _enqueue_then_roll_back(enqueued: list[str]) -> None:
    with transaction.atomic():
        order = Order.objects.create(total_cents=5)
        enqueued.append(mark_paid.enqueue(order.pk).id)
        raise RuntimeError("rolled back")


def test_a_rolled_back_enqueue_writes_nothing_and_runs_nothing(xjobs_url: str) -> None:
    enqueued: list[str] = []
    with pytest.raises(RuntimeError, match="rolled back"):
        _enqueue_then_roll_back(enqueued)

    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(enqueued[0])
    stats = asyncio.run(run_worker(until_idle=True))
    assert stats.claimed == 0


def test_an_enqueue_in_a_transaction_is_written_at_its_commit(xjobs_url: str) -> None:
    with transaction.atomic():
        order = Order.objects.create(total_cents=7)
        result = mark_paid.enqueue(order.pk)
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(result.id)
        before_the_commit = result.enqueued_at
    assert before_the_commit is None
    assert result.enqueued_at is not None
    found = default_task_backend.get_result(result.id)
    assert (found.status, found.args, found.attempts) == (TaskResultStatus.READY, [order.pk], 0)


def test_run_after_and_priority_reach_the_job(xjobs_url: str) -> None:
    later = timezone.now() + timedelta(hours=1)
    result = mark_paid.using(run_after=later, priority=100).enqueue(1)
    found = default_task_backend.get_result(result.id)
    assert found.task.run_after == later
    assert found.task.priority == 100
    stats = asyncio.run(run_worker(until_idle=True))
    assert stats.claimed == 0  # not due for an hour


@pytest.mark.asyncio
async def test_aenqueue_and_aget_result(xjobs_url: str) -> None:
    result = await send_receipt.aenqueue(order_id=3)
    found = await default_task_backend.aget_result(result.id)
    assert (found.status, found.kwargs, found.task.queue_name) == (
        TaskResultStatus.READY,
        {"order_id": 3},
        "emails",
    )
    assert (await send_receipt.aget_result(result.id)).id == result.id
    with pytest.raises(TaskResultDoesNotExist):
        await default_task_backend.aget_result("01a242bc-0000-7000-8000-000000000000")


def test_bad_arguments_and_queues_are_refused_before_anything_is_written(xjobs_url: str) -> None:
    with pytest.raises(TypeError):
        mark_paid.enqueue(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidTask):
        mark_paid.using(queue_name="elsewhere").enqueue(1)
    assert asyncio.run(run_worker(until_idle=True)).claimed == 0


def test_an_unknown_id_does_not_exist(xjobs_url: str) -> None:
    for unknown in ("01a242bc-0000-7000-8000-000000000000", "not-an-id"):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(unknown)


def test_the_backend_says_what_it_supports(xjobs_url: str) -> None:
    backend = task_backends["default"]
    assert isinstance(backend, XJobsBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert backend.supports_priority


def test_priority_keeps_djangos_order_on_xjobs_levels() -> None:
    levels = [xjobs_priority(p) for p in range(TASK_MAX_PRIORITY, TASK_MIN_PRIORITY - 1, -1)]
    assert levels == sorted(levels)  # higher Django priority: a lower (earlier) xjobs level
    assert (levels[0], levels[-1], xjobs_priority(0)) == (0, 9, 4)
    assert set(levels) == set(range(10))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({}, "url"),
        ({"url": "nowhere"}, "url"),
        ({"url": "redis://h", "max_attempts": 0}, "max_attempts"),
        ({"url": "redis://h", "max_attempts": True}, "max_attempts"),
        ({"url": "redis://h", "database": 3}, "database"),
        ({"url": "redis://h", "backend_options": []}, "backend_options"),
        ({"url": "redis://h", "colour": "blue"}, "colour"),
    ],
)
def test_bad_options_are_refused_naming_the_option(options: dict[str, object], named: str) -> None:
    with pytest.raises(OptionInvalidError, match=f'"{named}"') as refused:
        read_options("default", options)
    assert refused.value.code == "XJOBS_OPTION_INVALID"
