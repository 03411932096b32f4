"""The FastAPI example service (examples/fastapi), run as its users run it: requests through
httpx to the real ASGI app, its lifespan opening the App, on every backend."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

SERVICE = Path(__file__).resolve().parents[2] / "examples" / "fastapi" / "service.py"


def load_service() -> ModuleType:
    """The example's module, loaded from its file as `uvicorn service:api` would."""
    spec = importlib.util.spec_from_file_location("fastapi_example_service", SERVICE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def serving(
    url: str, *, in_process_worker: bool
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The service's lifespan run as a server runs it, and a client speaking HTTP to it."""
    service = load_service()
    api, jobs = service.create_service(url, in_process_worker=in_process_worker)
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client, jobs


@pytest.mark.asyncio
async def test_an_order_placed_by_a_request_is_charged_by_the_in_process_worker(
    backend_url: str,
) -> None:
    async with serving(backend_url, in_process_worker=True) as (client, _):
        placed = await client.post("/orders", json={"order_id": "o-1", "amount_cents": 1250})
        assert placed.status_code == 202
        job_id = placed.json()["job_id"]
        receipt = await client.get(f"/orders/{job_id}/receipt", params={"wait": 20})
        assert receipt.status_code == 200, receipt.text
        assert receipt.json() == {"order_id": "o-1", "charged_cents": 1250}


@pytest.mark.asyncio
async def test_a_receipt_is_pending_until_a_worker_runs_then_a_failure_is_reported(
    durable_url: str,
) -> None:
    async with serving(durable_url, in_process_worker=False) as (client, jobs):
        ok = (await client.post("/orders", json={"order_id": "o-2", "amount_cents": 300})).json()
        bad = (await client.post("/orders", json={"order_id": "o-3", "amount_cents": 0})).json()
        # placed again while the first is live: the same job (the order id is its idempotency key)
        again = (await client.post("/orders", json={"order_id": "o-2", "amount_cents": 300})).json()
        assert again["job_id"] == ok["job_id"]
        pending = await client.get(f"/orders/{ok['job_id']}/receipt", params={"wait": 0.2})
        assert pending.status_code == 409
        assert (
            await client.get("/orders/00000000-0000-0000-0000-000000000000/receipt")
        ).status_code == 404
        await jobs.run_worker(until_idle=True)
        done = await client.get(f"/orders/{ok['job_id']}/receipt", params={"wait": 5})
        assert done.json() == {"order_id": "o-2", "charged_cents": 300}
        failed = await client.get(f"/orders/{bad['job_id']}/receipt", params={"wait": 5})
        assert failed.status_code == 422
        assert "nothing to charge for order o-3" in failed.json()["detail"]
