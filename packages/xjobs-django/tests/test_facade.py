"""The backend enqueues through the xjobs jobs facade: its telemetry counts every enqueue, and a
task `OPTIONS["flow"]` names is debounced or throttled on its arguments, as `handle.enqueue` is."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from shop.models import Order
from shop.tasks import mark_paid, send_receipt

from xjobs.errors import OptionInvalidError
from xjobs_django import XJobsBackend, run_worker
from xjobs_django.options import read_options

HOUR = 3_600


@pytest.fixture
def flow_url(xjobs_url: str) -> Iterator[str]:
    """The project's backend with `mark_paid` debounced and `send_receipt` throttled for an hour."""
    flow = {
        "shop.tasks.mark_paid": {"debounce": HOUR},
        "shop.tasks.send_receipt": {"throttle": HOUR},
    }
    tasks = {
        "default": {
            "BACKEND": "xjobs_django.XJobsBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": xjobs_url, "flow": flow},
        }
    }
    with override_settings(TASKS=tasks):
        yield xjobs_url


def _enqueued_total(backend: XJobsBackend) -> dict[tuple[str, str], float]:
    metrics = backend.telemetry.metrics
    assert metrics is not None
    body, _ = metrics.exposition()
    return {
        (s.labels["job"], s.labels["queue"]): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
        if s.name == "xjobs_jobs_enqueued_total"
    }


def test_every_enqueue_counts_in_the_enqueued_total(xjobs_url: str) -> None:
    backend = task_backends["default"]
    assert isinstance(backend, XJobsBackend)
    backend.telemetry.enable_metrics()
    mark_paid.enqueue(1)
    mark_paid.enqueue(2)
    asyncio.run(send_receipt.aenqueue(order_id=3))
    assert _enqueued_total(backend) == {("django_task", "default"): 2, ("django_task", "emails"): 1}


def test_a_debounced_task_folds_the_same_call_into_one_job_due_after_the_window(
    flow_url: str,
) -> None:
    backend = task_backends["default"]
    assert isinstance(backend, XJobsBackend)
    backend.telemetry.enable_metrics()
    first = mark_paid.enqueue(1)
    again = mark_paid.enqueue(1)
    other = mark_paid.enqueue(2)

    assert again.id == first.id  # the result names the job the call joined
    assert other.id != first.id
    found = default_task_backend.get_result(first.id)
    assert (found.status, found.args) == (TaskResultStatus.READY, [1])
    assert asyncio.run(run_worker(until_idle=True)).claimed == 0  # due an hour after the last
    assert _enqueued_total(backend) == {("django_task", "default"): 2}  # the fold made no job


def test_a_throttled_task_runs_the_first_call_of_its_window(flow_url: str) -> None:
    order = Order.objects.create(total_cents=9)
    first = asyncio.run(send_receipt.aenqueue(order_id=order.pk))
    again = asyncio.run(send_receipt.aenqueue(order_id=order.pk))
    assert again.id == first.id
    stats = asyncio.run(run_worker(until_idle=True))
    assert (stats.claimed, stats.completed) == (1, 1)
    assert default_task_backend.get_result(first.id).status == TaskResultStatus.SUCCESSFUL


def test_debounce_with_run_after_is_refused_at_the_call(flow_url: str) -> None:
    later = timezone.now() + timedelta(hours=1)
    with pytest.raises(OptionInvalidError, match="debounce"):
        mark_paid.using(run_after=later).enqueue(1)
    assert asyncio.run(run_worker(until_idle=True)).claimed == 0


@pytest.mark.parametrize(
    "flow",
    [
        [],
        {"mark_paid": {"debounce": 1}},
        {"shop.tasks.mark_paid": {"debounce": -1}},
        {"shop.tasks.mark_paid": {"debounce": float("nan")}},
        {"shop.tasks.mark_paid": {"sleep": 1}},
        {"shop.tasks.mark_paid": {"debounce": 1, "throttle": 1}},
    ],
)
def test_a_bad_flow_option_is_refused(flow: object) -> None:
    with pytest.raises(OptionInvalidError, match='"flow"') as refused:
        read_options("default", {"url": "redis://h", "flow": flow})
    assert refused.value.code == "XJOBS_OPTION_INVALID"
