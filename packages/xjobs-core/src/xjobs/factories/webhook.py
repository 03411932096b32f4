"""`webhook()`: one event to one endpoint as a job over `job()` — signed, gated by the ledger, every attempt but a cancelled one recorded before it raises."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, field_validator

from xjobs.clock import Clock, SystemClock
from xjobs.contract.webhooks import (
    LedgerPolicy,
    WebhookAttempt,
    WebhookInvalidError,
    WebhookLedger,
    WebhookStatus,
    endpoint_id,
    message_id,
)
from xjobs.declare.job import JobHandle, job
from xjobs.declare.retry import Retry
from xjobs.errors import CapabilityMissingError, DeclarationInvalidError, XJobsError
from xjobs.factories.webhook_errors import (
    TenantMismatchError,
    WebhookEndpointDisabledError,
    WebhookEndpointUnknownError,
)
from xjobs.factories.webhook_http import post
from xjobs.factories.webhook_sign import secret_key, signed_headers
from xjobs.ids import new_id
from xjobs.names import DEFAULT_QUEUE
from xjobs.options import duration_ms
from xjobs.run.context import JobContext

log = logging.getLogger("xjobs.factories.webhook")

WEBHOOK_JOB: Final = "xjobs.webhook"
# Standard Webhooks senders retry for about a day; here: 8 attempts, 5 s doubling to 2 h.
DEFAULT_RETRY: Final = Retry(attempts=8, base=timedelta(seconds=5), cap=timedelta(hours=2))
DEFAULT_DISABLE_AFTER: Final = 20
DEFAULT_REQUEST_TIMEOUT: Final = timedelta(seconds=15)
# The job's own deadline, past the request's: a request that times out is recorded, a run the
# deadline cancels is not.
DEADLINE_MARGIN: Final = timedelta(seconds=30)
TenantMode = Literal["org", "none"]
LedgerSource = Callable[[], "WebhookLedger | None"]


class WebhookEvent(BaseModel):
    """One event for one endpoint: its `type` and `data`, the message `id` every attempt sends as
    `webhook-id` (a receiver dedupes on it), when it happened, and the org it belongs to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str
    type: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)
    id: str = Field(default_factory=lambda: f"msg_{new_id()}")
    timestamp: datetime = Field(default_factory=lambda: datetime.now(UTC))
    org_id: str | None = None

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        try:
            return endpoint_id(value)
        except WebhookInvalidError as exc:
            raise ValueError(exc.message) from None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        try:
            return message_id(value)
        except WebhookInvalidError as exc:
            raise ValueError(exc.message) from None


@dataclass(frozen=True, slots=True, repr=False)
class Endpoint:
    """Where an endpoint id delivers: its `url` (http or https), the `secrets` each request is
    signed with (one signature per secret: list the new one beside the old while rotating), and
    the org that owns it (required when the job is org-scoped). Its repr shows no secret."""

    url: str
    secrets: tuple[str, ...]
    org_id: str | None = None

    def __post_init__(self) -> None:
        if not _dialable(self.url):
            raise WebhookInvalidError(
                f"webhook endpoint url {_shown(self.url)!r:.120} must be http(s)://host[:port]/…"
            )
        raw: object = self.secrets  # a lone secret may be given as a str
        given = (raw,) if isinstance(raw, str) else tuple(self.secrets)
        if not given:
            raise WebhookInvalidError("a webhook endpoint needs at least one secret")
        for secret in given:
            secret_key(secret)
        object.__setattr__(self, "secrets", given)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(url={_shown(self.url)!r}, "
            f"secrets=<{len(self.secrets)} hidden>, org_id={self.org_id!r})"
        )


def _dialable(url: object) -> bool:
    """An http(s) URL with a host and, if any, a valid port (read here, not at the first attempt)."""
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _shown(url: object) -> object:
    """A URL as a message or a repr shows it: without its userinfo (a password may be there)."""
    if not isinstance(url, str):
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


Resolved = Endpoint | None | Awaitable[Endpoint | None]
EndpointSource = Mapping[str, Endpoint] | Callable[[str], Resolved]


async def _resolve(endpoints: EndpointSource, endpoint: str) -> Endpoint | None:
    if isinstance(endpoints, Mapping):
        return endpoints.get(endpoint)
    found = endpoints(endpoint)
    if inspect.isawaitable(found):
        found = await found
    if found is not None and not isinstance(found, Endpoint):
        raise WebhookInvalidError(
            f"endpoints({endpoint!r}) answered {found!r:.80}, not an Endpoint"
        )
    return found


def _foreign(mode: TenantMode, ctx: JobContext, event: WebhookEvent) -> XJobsError | None:
    """Why an org-scoped event may not be delivered by this run: it names no org, or not the org
    the run acts for (`ctx.tenant`). A run enqueued through the facade always agrees (its tenant
    is derived from this field); the rule is held here, where the request is signed and sent."""
    if mode == "org" and (event.org_id is None or event.org_id != ctx.tenant):
        return TenantMismatchError(
            f"the event names org {event.org_id!r} but the run acts for {ctx.tenant!r}"
        )
    return None


def _unreachable(
    mode: TenantMode, event: WebhookEvent, endpoint: Endpoint | None
) -> XJobsError | None:
    """Why the event's endpoint is not one this run may write to: unknown, or another org's."""
    if endpoint is None:
        return WebhookEndpointUnknownError(f"no webhook endpoint has id {event.endpoint!r}")
    if mode == "org" and endpoint.org_id != event.org_id:
        return TenantMismatchError(
            f"endpoint {event.endpoint!r} belongs to another org than the event's ({event.org_id!r})"
        )
    return None


def wire_body(event: WebhookEvent) -> bytes:
    """The request body: `{"type", "timestamp", "data"}` as compact JSON (the same bytes on
    every attempt)."""
    return pydantic_core.to_json(
        {"type": event.type, "timestamp": event.timestamp, "data": event.data}
    )


def _org_of(event: WebhookEvent) -> str:
    if event.org_id is None:
        raise TenantMismatchError("an org-scoped webhook event must name its org_id")
    return event.org_id


@dataclass(frozen=True, slots=True)
class _Delivery:
    """The factory's declaration, resolved once: what each attempt reads."""

    endpoints: EndpointSource
    ledger: LedgerSource
    mode: TenantMode
    policy: LedgerPolicy
    timeout_s: float
    clock: Clock
    allow_private: bool

    def store(self) -> WebhookLedger:
        found = self.ledger()
        if found is None:
            raise CapabilityMissingError("webhook(): the backend offers no 'webhooks' ledger")
        return found

    def attempt(
        self,
        ctx: JobContext,
        event: WebhookEvent,
        status: WebhookStatus,
        *,
        http_status: int | None = None,
        latency_ms: int = 0,
        excerpt: str = "",
        error: XJobsError | None = None,
    ) -> WebhookAttempt:
        return WebhookAttempt(
            endpoint=event.endpoint,
            message_id=event.id,
            job_id=ctx.job_id,
            attempt=ctx.attempt,
            status=status,
            http_status=http_status,
            latency_ms=latency_ms,
            excerpt=excerpt,
            error=None if error is None else str(error),
            at_ms=self.clock.now_ms(),
        )

    async def run(self, ctx: JobContext, event: WebhookEvent) -> dict[str, Any]:
        """One attempt: gate, dial, record, then return or raise. An attempt refused before its
        endpoint is known to be the run's org's writes no ledger row: the ledger it would land in
        may be another org's (or no endpoint's)."""
        ledger = self.store()
        foreign = _foreign(self.mode, ctx, event)
        if foreign is not None:
            raise foreign
        endpoint = await _resolve(self.endpoints, event.endpoint)
        unreachable = _unreachable(self.mode, event, endpoint)
        if unreachable is not None or endpoint is None:
            raise unreachable or WebhookEndpointUnknownError(event.endpoint)
        if (await ledger.state(event.endpoint)).disabled:
            refusal = WebhookEndpointDisabledError(f"endpoint {event.endpoint!r} is disabled")
            await ledger.record(self.attempt(ctx, event, "skipped", error=refusal), self.policy)
            raise refusal
        body = wire_body(event)
        headers = signed_headers(endpoint.secrets, event.id, int(time.time()), body)
        answer = await post(
            endpoint.url, headers, body, self.timeout_s, allow_private=self.allow_private
        )
        recorded = self.attempt(
            ctx,
            event,
            answer.status,
            http_status=answer.http_status,
            latency_ms=answer.latency_ms,
            excerpt=answer.excerpt,
            error=answer.error,
        )
        state = await ledger.record(recorded, self.policy)
        if answer.error is None:
            return {"status": answer.http_status, "attempt": ctx.attempt}
        if state.disabled_at_ms == recorded.at_ms and state.failures >= self.policy.disable_after:
            log.warning(
                "jobs.webhook.endpoint-disabled",
                extra={
                    "endpoint": event.endpoint,
                    "job_id": ctx.job_id,
                    "failures": state.failures,
                },
            )
        if state.disabled:
            raise WebhookEndpointDisabledError(
                f"endpoint {event.endpoint!r} is disabled after {state.failures} failures in a row"
            ) from answer.error
        raise answer.error


def webhook(
    *,
    endpoints: EndpointSource,
    ledger: LedgerSource,
    tenant: TenantMode = "org",
    name: str = WEBHOOK_JOB,
    queue: str = DEFAULT_QUEUE,
    retry: Retry = DEFAULT_RETRY,
    disable_after: int = DEFAULT_DISABLE_AFTER,
    keep: int = 1_000,
    request_timeout: timedelta = DEFAULT_REQUEST_TIMEOUT,
    timeout: timedelta | None = None,
    clock: Clock | None = None,
    allow_private: bool = False,
) -> JobHandle[WebhookEvent]:
    """A job that delivers ONE `WebhookEvent` to ONE endpoint, with no steps.

    `endpoints` maps an endpoint id to its `Endpoint` (a mapping, or a callable, sync or async,
    answering `None` for an unknown id); `ledger` answers the backend's `WebhookLedger`
    (`lambda: app.backend.webhooks`). Each attempt is signed per Standard Webhooks with the
    event's `id` as `webhook-id`, so a retry is the same message. A 2xx completes; 408, 429, 5xx,
    a timeout past `request_timeout` or no connection retry on `retry`'s curve, at least the
    answer's `Retry-After` later; another 4xx or a redirect (never followed) is terminal. Every
    attempt but a cancelled one is recorded in the ledger before the attempt raises; after
    `disable_after` failures in a row the endpoint is disabled and never dialled again until
    `ledger.enable()`. With `tenant="org"` the org is read off the input (`org_id`): a run whose
    org is not the input's, or an endpoint of another org, is terminal `XJOBS_JOB_TENANT_MISMATCH`
    and writes no ledger row.

    The endpoint's host is resolved at each attempt and the request dials the address checked: a
    loopback, private (RFC 1918, ULA), shared (100.64/10), link-local, metadata, multicast,
    unspecified or reserved address (IPv4-mapped and NAT64 forms included) is terminal
    `XJOBS_WEBHOOK_ADDRESS_REFUSED`, never dialled. `allow_private=True` opens loopback, private
    and shared addresses, never the others. The answer is asked for and read as `identity`, at
    most a few KiB of it, never decoded.
    """
    if tenant not in ("org", "none"):
        raise DeclarationInvalidError(f"webhook tenant must be 'org' or 'none', got {tenant!r}")
    if not isinstance(endpoints, Mapping) and not callable(endpoints):
        raise DeclarationInvalidError("webhook endpoints must be a mapping or a callable")
    if not callable(ledger):
        raise DeclarationInvalidError("webhook ledger must be a callable answering the ledger")
    if not isinstance(allow_private, bool):
        raise DeclarationInvalidError("webhook allow_private must be True or False")
    request_ms = duration_ms("webhook request_timeout", request_timeout)
    delivery = _Delivery(
        endpoints=endpoints,
        ledger=ledger,
        mode=tenant,
        policy=LedgerPolicy(disable_after=disable_after, keep=keep),
        timeout_s=request_ms / 1000,
        clock=clock or SystemClock(),
        allow_private=allow_private,
    )

    async def body(ctx: JobContext, event: WebhookEvent) -> dict[str, Any]:
        return await delivery.run(ctx, event)

    return job(
        body,
        tenant=_org_of if tenant == "org" else "none",
        idempotency_key=lambda event: f"{event.endpoint}:{event.id}",
        name=name,
        queue=queue,
        input_model=WebhookEvent,
        retry=retry,
        timeout=timeout if timeout is not None else request_timeout + DEADLINE_MARGIN,
    )
