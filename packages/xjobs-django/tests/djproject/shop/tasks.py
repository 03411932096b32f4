"""The shop's tasks: a plain one on the ORM, an async one with its context on another queue, one
that raises, and a slow one that leaves markers for the kill test."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.tasks import TaskContext, task

from shop.models import Order


class OutOfStock(Exception):
    pass


@task
def mark_paid(order_id: int) -> int:
    order = Order.objects.get(pk=order_id)
    order.paid = True
    order.save(update_fields=["paid"])
    return int(order.total_cents)


@task(queue_name="emails", priority=20, takes_context=True)
async def send_receipt(context: TaskContext[Any, Any], order_id: int) -> dict[str, Any]:
    order = await Order.objects.aget(pk=order_id)
    return {"order": order.pk, "attempt": context.attempt}


@task
def reserve_stock(sku: str) -> None:
    raise OutOfStock(f"no stock left for {sku}")


@task(takes_context=True)
def slow_tally(context: TaskContext[Any, Any], marker_dir: str, seconds: float) -> int:
    markers = Path(marker_dir)
    with (markers / "started").open("a") as started:
        started.write(f"{context.attempt}\n")
    time.sleep(seconds)
    with (markers / "finished").open("a") as finished:
        finished.write(f"{context.attempt}\n")
    return context.attempt
