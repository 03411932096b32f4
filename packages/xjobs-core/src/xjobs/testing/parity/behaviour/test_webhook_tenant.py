"""Parity: a webhook of one org never dials, nor writes into the ledger of, another org's endpoint
(issue 40 item 12; semantics.md, "Factories", `webhook()`): a tenant mismatch is terminal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from xjobs.contract.webhooks import WebhookLedger
from xjobs.declare.job import JobHandle
from xjobs.errors import XJobsError
from xjobs.factories import Endpoint, WebhookEvent, webhook
from xjobs.factories.webhook_errors import TenantMismatchError
from xjobs.testing.parity.env import ParityEnv
from xjobs.testing.parity.jobs import LEASE, QUEUE, within

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("webhooks")]

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass
class Dials:
    """A loopback listener that counts the connections made to it (and answers none)."""

    url: str = ""
    count: int = 0


@asynccontextmanager
async def _listening() -> AsyncIterator[Dials]:
    dials = Dials()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dials.count += 1
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    dials.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"
    async with server:
        yield dials


def _deliver(parity: ParityEnv, url: str) -> JobHandle[WebhookEvent]:
    endpoints = {
        "a-hook": Endpoint(url=url, secrets=(SECRET,), org_id="org-a"),
        "b-hook": Endpoint(url=url, secrets=(SECRET,), org_id="org-b"),
    }
    return webhook(
        endpoints=endpoints,
        ledger=lambda: parity.backend.webhooks,
        name="parity_webhook",
        queue=QUEUE,
        allow_private=True,  # the listener is on 127.0.0.1
    )


def _ledger(parity: ParityEnv) -> WebhookLedger:
    ledger = parity.backend.webhooks
    assert ledger is not None
    return ledger


def _is_mismatch(error: BaseException | None) -> bool:
    while error is not None:
        if isinstance(error, TenantMismatchError):
            return True
        error = error.__cause__
    return False


class TestWebhookTenant:
    async def test_an_event_for_another_orgs_endpoint_is_terminal_and_writes_no_ledger_row(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an org's event naming an endpoint of another org is terminal
        `XJOBS_JOB_TENANT_MISMATCH`; the endpoint is never dialled and its ledger (the other
        org's) gets no row, not even a skipped one."""
        async with _listening() as dials:
            deliver = _deliver(parity, dials.url)
            async with parity.app([deliver]) as app:
                event = WebhookEvent(endpoint="b-hook", type="invoice.paid", org_id="org-a")
                job_id = (await deliver.enqueue(event)).job_id
                await within(app.run_worker(lease=LEASE, until_idle=True), what="the run")
                record = await parity.record(job_id)
        assert (record.state, record.attempt) == ("dead", 1)
        assert "XJOBS_JOB_TENANT_MISMATCH" in (record.last_error or "")
        assert "org-b" not in (record.last_error or "")  # the endpoint's owner is not told
        assert dials.count == 0
        assert await _ledger(parity).attempts("b-hook") == []
        assert (await _ledger(parity).state("b-hook")).failures == 0

    async def test_an_event_without_an_org_is_refused_at_enqueue_with_nothing_written(
        self, parity: ParityEnv
    ) -> None:
        """Rule: an org-scoped webhook reads its org off the event; an event that names none is
        refused by the enqueue (a tenant mismatch), before any row is written."""
        async with _listening() as dials:
            deliver = _deliver(parity, dials.url)
            async with parity.app([deliver]) as app:
                with pytest.raises(XJobsError) as refused:
                    await deliver.enqueue(WebhookEvent(endpoint="a-hook", type="invoice.paid"))
                stats = await within(app.run_worker(lease=LEASE, until_idle=True), what="a pass")
        assert _is_mismatch(refused.value)
        assert stats.claimed == 0
        assert dials.count == 0
        assert await _ledger(parity).attempts("a-hook") == []
