"""`webhook()`'s own tenant check: a run that acts for another org than its event names (or whose
event names none) sends nothing and writes no ledger row. The worker derives a run's org from the
event itself, so the run here is built by hand: a row stored for org-a, claimed from the memory
backend, its context acting for that stored tenant while the event names org-b or no org."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import cast

import pytest

import xjobs
from xjobs.contract.driver import ClaimOptions
from xjobs.factories import Endpoint, WebhookEvent, new_secret, webhook
from xjobs.factories.webhook_errors import TenantMismatchError
from xjobs.run.context import JobContext, RunTools
from xjobs.run.record import RunRecord
from xjobs.run.signal import RunSignal
from xjobs.testing.rows import new_job

SECRET = new_secret()


@pytest.mark.asyncio
@pytest.mark.parametrize("named", ["org-b", None])
async def test_a_run_acting_for_another_org_than_its_event_names_sends_and_records_nothing(
    named: str | None,
) -> None:
    holder: list[xjobs.App] = []
    # never dialled: a port nothing listens on, on loopback, opened only so that a wrong answer
    # here would fail on the ledger, not leave the machine
    url = "http://127.0.0.1:9/hook"
    endpoints = {
        "b-hook": Endpoint(url=url, secrets=(SECRET,), org_id="org-b"),
        "none-hook": Endpoint(url=url, secrets=(SECRET,)),
    }
    deliver = webhook(
        endpoints=endpoints, ledger=lambda: holder[0].backend.webhooks, allow_private=True
    )
    app = xjobs.App(backend="memory://", jobs=[deliver], clock=xjobs.ManualClock())
    holder.append(app)
    endpoint = "b-hook" if named else "none-hook"
    event = WebhookEvent(endpoint=endpoint, type="invoice.paid", org_id=named)
    async with app:
        row = new_job(
            name=deliver.name,
            queue=deliver.queue,
            tenant_id="org-a",
            payload=event.model_dump_json(),
        )
        await app.backend.jobs.enqueue([row])
        options = ClaimOptions(worker_id="w-1", queues={deliver.queue: 1}, lease_ms=30_000)
        (claimed,) = (await app.backend.jobs.claim(options)).jobs
        run = replace(RunRecord.open(deliver, claimed), value=event, tenant=claimed.tenant_id)
        ctx = JobContext(run, RunSignal(), RunTools(app.clock, app.backend.jobs.record_progress))
        with pytest.raises(TenantMismatchError) as refused:
            await cast("Callable[..., Awaitable[object]]", deliver.fn)(ctx, event)
        ledger = app.backend.webhooks
        assert ledger is not None
        assert await ledger.attempts(endpoint) == []
    assert refused.value.code == "XJOBS_JOB_TENANT_MISMATCH"
    assert isinstance(refused.value, xjobs.Terminal)
