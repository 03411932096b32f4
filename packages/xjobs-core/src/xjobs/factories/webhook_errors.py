"""The webhook factory's refusals: one class each; their codes stay declared in `xjobs.errors`."""

from __future__ import annotations

from xjobs import errors
from xjobs.errors import Terminal, XJobsError


class TenantMismatchError(Terminal):
    """A run of an org-scoped webhook whose event names no org, or another org than the run's (or
    the endpoint's): terminal, nothing is sent and nothing is recorded in any endpoint's ledger.

    To do: Fix the event's `org_id` (or the endpoint's org) where the event is built.
    """

    code = errors.JOB_TENANT_MISMATCH


class WebhookEndpointUnknownError(Terminal):
    """The event names an endpoint id the factory's `endpoints` does not know.

    To do: Add the endpoint to the factory's `endpoints`, or fix the event's endpoint id.
    """

    code = errors.WEBHOOK_ENDPOINT_UNKNOWN


class WebhookEndpointDisabledError(Terminal):
    """The endpoint is disabled (its run of failures reached `disable_after`): it is never dialled.

    To do: Fix the receiver, then enable the endpoint again (see docs/webhooks.md).
    """

    code = errors.WEBHOOK_ENDPOINT_DISABLED


class WebhookRejectedError(Terminal):
    """The receiver answered a 4xx other than 408 and 429, or a redirect (refused, never followed).

    To do: Fix the request the receiver refuses (its body, its signature secret, its URL); it is
    not retried.
    """

    code = errors.WEBHOOK_REJECTED


class WebhookAddressRefusedError(Terminal):
    """The endpoint's host resolves to an address a webhook never dials (loopback, private,
    shared, link-local, metadata, multicast, unspecified or reserved): nothing was sent.

    To do: Point the endpoint at a public address; a receiver inside the network needs
    `allow_private=True` on the factory.
    """

    code = errors.WEBHOOK_ADDRESS_REFUSED


class WebhookFailedError(XJobsError):
    """A retryable failure: a 5xx, 408 or 429, a timeout, or no connection. `retry_after_ms` is
    the receiver's `Retry-After`, which the retry waits at least (`None`: the backoff curve).

    To do: Nothing: the send is retried after the backoff (at least `retry_after_ms`).
    """

    code = errors.WEBHOOK_FAILED

    def __init__(self, message: str, *, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
