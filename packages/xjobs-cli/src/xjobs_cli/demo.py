"""The demo's sample app, on a SQLite file by default: jobs that complete, retry, fail, report progress.

`xjobs worker xjobs_cli.demo:app` serves it as well: its `on_worker_start` enqueues one batch.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

import xjobs

log = logging.getLogger("xjobs.cli.demo")

# The file the demo keeps its jobs in (in the working directory): a run killed half-way resumes.
DEMO_URL = "sqlite:///xjobs-demo.db"
ORGS = ("acme", "globex", "initech")
FAST_RETRY = xjobs.Retry(
    attempts=3, base=timedelta(milliseconds=100), cap=timedelta(milliseconds=400)
)


# -- inputs ------------------------------------------------------------------------------------


class Email(BaseModel):
    """A welcome email to send."""

    org_id: str
    to: str


class Image(BaseModel):
    """An image to resize."""

    org_id: str
    image_id: str
    width: int


class InventorySync(BaseModel):
    """One SKU to sync with the warehouse."""

    org_id: str
    sku: str


class Charge(BaseModel):
    """An invoice to charge."""

    org_id: str
    invoice_id: str
    cents: int


class PartnerCall(BaseModel):
    """A call to a flaky partner API."""

    org_id: str
    request_id: str


class CatalogImport(BaseModel):
    """A catalog to import, page by page."""

    org_id: str
    catalog: str
    pages: int


# -- jobs --------------------------------------------------------------------------------------


@xjobs.job(tenant=lambda i: i.org_id, idempotency_key=lambda i: i.to, queue="mail")
async def send_welcome_email(ctx: xjobs.JobContext, input: Email) -> None:
    """Completes quickly."""
    await asyncio.sleep(0.04 + 0.02 * (len(input.to) % 4))


@xjobs.job(tenant=lambda i: i.org_id, idempotency_key=lambda i: i.image_id, queue="media")
async def resize_image(ctx: xjobs.JobContext, input: Image) -> None:
    """Completes after a little work."""
    await asyncio.sleep(input.width / 4000)


@xjobs.job(tenant=lambda i: i.org_id, idempotency_key=lambda i: i.sku, retry=FAST_RETRY)
async def sync_inventory(ctx: xjobs.JobContext, input: InventorySync) -> None:
    """Fails its first attempt (a flaky upstream), succeeds on the retry 50–100 ms later."""
    await asyncio.sleep(0.05)
    if ctx.attempt == 1:
        raise ConnectionError(f"inventory service timed out for {input.sku} (simulated)")


@xjobs.job(tenant=lambda i: i.org_id, idempotency_key=lambda i: i.invoice_id, retry=FAST_RETRY)
async def charge_card(ctx: xjobs.JobContext, input: Charge) -> None:
    """Fails for good: a declined card is not worth a retry; `xjobs.Terminal` makes it dead."""
    await asyncio.sleep(0.03)
    raise xjobs.Terminal(f"card declined for invoice {input.invoice_id}")


@xjobs.job(
    tenant=lambda i: i.org_id,
    idempotency_key=lambda i: i.request_id,
    retry=xjobs.Retry(attempts=2, base=timedelta(milliseconds=100), dead_letter=False),
)
async def call_partner_api(ctx: xjobs.JobContext, input: PartnerCall) -> None:
    """Fails every attempt; after its 2 attempts it is failed for good (`dead_letter=False`)."""
    await asyncio.sleep(0.03)
    raise RuntimeError(f"partner API answered 503 for {input.request_id} (simulated)")


@xjobs.job(tenant=lambda i: i.org_id, idempotency_key=lambda i: i.catalog, queue="reports")
async def import_catalog(ctx: xjobs.JobContext, input: CatalogImport) -> None:
    """Reports its progress page by page (the worker writes it at most once a second)."""
    for page in range(1, input.pages + 1):
        await asyncio.sleep(0.2)
        await ctx.progress(page / input.pages)


# -- the batch ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DemoKind:
    """One job of the demo, how many of it a batch enqueues, and how each must end."""

    handle: xjobs.JobHandle[Any]
    count: int
    make_input: Callable[[int], BaseModel]
    expected_state: str
    expected_retries: int

    @property
    def name(self) -> str:
        """The job name of this kind."""
        return self.handle.name


def _org(i: int) -> str:
    return ORGS[i % len(ORGS)]


KINDS: tuple[DemoKind, ...] = (
    DemoKind(
        import_catalog,
        1,
        lambda i: CatalogImport(org_id=_org(i), catalog=f"spring-{i}", pages=10),
        "completed",
        0,
    ),
    DemoKind(
        send_welcome_email,
        20,
        lambda i: Email(org_id=_org(i), to=f"user{i}@example.com"),
        "completed",
        0,
    ),
    DemoKind(
        resize_image,
        10,
        lambda i: Image(org_id=_org(i), image_id=f"img-{i}", width=200 + 80 * i),
        "completed",
        0,
    ),
    DemoKind(
        sync_inventory,
        4,
        lambda i: InventorySync(org_id=_org(i), sku=f"SKU-{1000 + i}"),
        "completed",
        1,
    ),
    DemoKind(
        charge_card,
        3,
        lambda i: Charge(org_id=_org(i), invoice_id=f"inv-{i}", cents=1999),
        "dead",
        0,
    ),
    DemoKind(
        call_partner_api,
        2,
        lambda i: PartnerCall(org_id=_org(i), request_id=f"req-{i}"),
        "failed",
        1,
    ),
)


async def enqueue_batch(
    app: xjobs.App, kinds: tuple[DemoKind, ...] = KINDS
) -> dict[str, list[str]]:
    """Enqueue each kind's jobs (one round trip per kind); answers the job ids by job name."""
    ids: dict[str, list[str]] = {}
    for kind in kinds:
        results = await app.enqueue_many(
            kind.handle, [kind.make_input(i) for i in range(kind.count)]
        )
        ids[kind.name] = [r.job_id for r in results]
    return ids


async def _enqueue_on_worker_start(app: xjobs.App) -> None:
    ids = await enqueue_batch(app)
    log.info("demo batch enqueued: %d jobs", sum(len(v) for v in ids.values()))


def build_app(backend: str = DEMO_URL) -> xjobs.App:
    """A demo App on `backend` (each open of `memory://` is a new empty store)."""
    return xjobs.App(
        backend=backend, jobs=[sys.modules[__name__]], on_worker_start=_enqueue_on_worker_start
    )


app = build_app()
