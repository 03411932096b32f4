"""The shop's views: place an order (enqueueing its tasks in the order's transaction), a rejected
order whose transaction rolls back, and a task result read back."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.tasks import default_task_backend

from shop.models import Order
from shop.tasks import mark_paid, reserve_stock, send_receipt

# The ids of the tasks enqueued by rolled-back requests, for the tests to look up.
ROLLED_BACK: list[str] = []


class OrderRejected(Exception):
    pass


def place_order(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(total_cents=int(request.POST["total_cents"]))
        paid = mark_paid.enqueue(order.pk)
        receipt = send_receipt.enqueue(order_id=order.pk)
        stock = reserve_stock.enqueue(request.POST.get("sku", "SKU-1"))
    return JsonResponse(
        {"order": order.pk, "paid": paid.id, "receipt": receipt.id, "stock": stock.id}
    )


def place_rejected_order(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        order = Order.objects.create(total_cents=int(request.POST["total_cents"]))
        ROLLED_BACK.append(mark_paid.enqueue(order.pk).id)
        raise OrderRejected(f"order {order.pk} was rejected")


def result(request: HttpRequest, result_id: str) -> JsonResponse:
    found = default_task_backend.get_result(result_id)
    return JsonResponse(
        {
            "status": str(found.status),
            "return_value": found.return_value if found.status == "SUCCESSFUL" else None,
            "errors": [e.exception_class_path for e in found.errors],
        }
    )
