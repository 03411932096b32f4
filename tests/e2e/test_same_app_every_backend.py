"""End to end: one user app module runs unchanged on every backend; only its URL changes.

`shop_app.py` charges a card (failing the first attempt, retried at once) and then enqueues a
receipt from inside the job. On memory, on Postgres and on Redis the same enqueue and the same
`run_worker(until_idle=True)` must end the same way.
"""

from __future__ import annotations

import importlib.util
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SHOP_APP = Path(__file__).with_name("shop_app.py")
ORDERS = [("o-1", 1250), ("o-2", 990), ("o-3", 4200)]


@pytest.fixture
def shop(backend_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A fresh import of the user's module, configured the way its users configure it: one URL."""
    monkeypatch.setenv("SHOP_BACKEND_URL", backend_url)
    name = f"shop_app_{secrets.token_hex(4)}"
    spec = importlib.util.spec_from_file_location(name, SHOP_APP)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the app registers `sys.modules[__name__]`
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


@pytest.mark.asyncio
async def test_the_same_app_module_ends_the_same_way_on_every_backend(
    shop: ModuleType, backend_url: str
) -> None:
    app = shop.app
    async with app:
        assert app.backend.name == engine(backend_url)
        charges = await app.enqueue_many(
            shop.charge_card, [shop.Order(order_id=o, cents=c) for o, c in ORDERS]
        )
        again = await shop.charge_card.enqueue(shop.Order(order_id="o-1", cents=1250))
        stats = await app.run_worker(until_idle=True)
        charge_rows = [await app.get_job(r.job_id) for r in charges]
        receipt_rows = [await app.get_job(shop.receipts[o]) for o, _ in ORDERS]

    assert (again.deduped, again.job_id) == (True, charges[0].job_id)
    assert sorted(shop.charges) == [(o, attempt) for o, _ in ORDERS for attempt in (1, 2)]
    assert sorted(shop.receipts) == [o for o, _ in ORDERS]
    assert {outcome(row) for row in charge_rows} == {
        ("charge_card", "completed", 2, "ConnectionError: the card processor timed out")
    }
    assert {outcome(row) for row in receipt_rows} == {("send_receipt", "completed", 1, None)}
    assert stats.as_dict() == {
        **dict.fromkeys(stats.as_dict(), 0),
        "claimed": 9,
        "completed": 6,
        "retried": 3,
    }


def engine(url: str) -> str:
    """The backend a URL names, by its scheme."""
    scheme = url.split("://", 1)[0]
    return {"memory": "memory", "redis": "redis", "rediss": "redis"}.get(scheme, "postgres")


def outcome(row: Any) -> tuple[str, str, int, str | None]:
    """A job's ending as every backend must report it: name, state, attempts, the error's head."""
    error = None if row.last_error is None else row.last_error.splitlines()[0]
    return (row.name, row.state, row.attempt, error)
