"""`WebhookLedger`: what each backend records of webhook deliveries — every attempt, and each endpoint's failure run and disablement."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable

from xjobs import errors
from xjobs.errors import XJobsError
from xjobs.options import finite_count

# delivered: a 2xx answer. failed: a retryable failure (5xx, 408, 429, a timeout, no connection).
# rejected: a terminal answer (another 4xx, a redirect). skipped: never dialled (a disabled
# endpoint, a tenant mismatch, an unknown endpoint). Failed and rejected extend the failure run,
# delivered ends it, skipped leaves it as it is.
WebhookStatus = Literal["delivered", "failed", "rejected", "skipped"]
WEBHOOK_STATUSES: Final[tuple[WebhookStatus, ...]] = ("delivered", "failed", "rejected", "skipped")
FAILING_STATUSES: Final = frozenset({"failed", "rejected"})
ENDPOINT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}")
MESSAGE_ID: Final = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
# A stored response excerpt or error is cut to this many characters.
MAX_EXCERPT_CHARS: Final = 1_000
MAX_ERROR_CHARS: Final = 1_000
# An attempts listing answers at most this many (newest first); an endpoint keeps at most this many.
MAX_ATTEMPTS_PAGE: Final = 1_000
MAX_KEPT: Final = 100_000


class WebhookInvalidError(XJobsError):
    """A webhook endpoint id, message id, secret, URL or ledger option is malformed.

    To do: Fix the value as the message says.
    """

    code = errors.WEBHOOK_INVALID


def endpoint_id(value: object) -> str:
    """An endpoint id: 1-200 characters of `[A-Za-z0-9_.:@-]`, a letter or digit first."""
    if not isinstance(value, str) or not ENDPOINT_ID.fullmatch(value):
        raise WebhookInvalidError(
            f"webhook endpoint id {value!r:.80} must be 1-200 characters of [A-Za-z0-9_.:@-]"
        )
    return value


def message_id(value: object) -> str:
    """A message id (`webhook-id`): 1-200 characters of `[A-Za-z0-9_.:-]`."""
    if not isinstance(value, str) or not MESSAGE_ID.fullmatch(value):
        raise WebhookInvalidError(
            f"webhook message id {value!r:.80} must be 1-200 characters of [A-Za-z0-9_.:-]"
        )
    return value


def stored_text(text: str | None, limit: int) -> str | None:
    """Text as a ledger stores it: cut to `limit` characters, NUL and lone surrogates replaced
    (Postgres `text` refuses them), alike on every backend."""
    if text is None:
        return None
    cut = text[:limit].replace("\x00", "\ufffd")
    return cut.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True, slots=True)
class LedgerPolicy:
    """How a record moves its endpoint: disabled once `disable_after` failures run in a row; the
    newest `keep` attempts of the endpoint are kept."""

    disable_after: int
    keep: int = 1_000

    def __post_init__(self) -> None:
        finite_count("webhook disable_after", self.disable_after, minimum=1)
        finite_count("webhook keep", self.keep, minimum=1, maximum=MAX_KEPT)


@dataclass(frozen=True, slots=True)
class WebhookAttempt:
    """One delivery attempt as the ledger records it (instants in epoch ms from the injected clock)."""

    endpoint: str
    message_id: str
    job_id: str
    attempt: int
    status: WebhookStatus
    http_status: int | None
    latency_ms: int
    excerpt: str
    error: str | None
    at_ms: int

    def __post_init__(self) -> None:
        endpoint_id(self.endpoint)
        message_id(self.message_id)
        if self.status not in WEBHOOK_STATUSES:
            raise WebhookInvalidError(
                f"webhook attempt status {self.status!r} is not one of {WEBHOOK_STATUSES}"
            )
        finite_count("webhook attempt", self.attempt, minimum=0)
        finite_count("webhook latency_ms", self.latency_ms, minimum=0)
        if self.http_status is not None:
            finite_count("webhook http_status", self.http_status, minimum=100, maximum=599)
        object.__setattr__(self, "excerpt", stored_text(self.excerpt, MAX_EXCERPT_CHARS) or "")
        object.__setattr__(self, "error", stored_text(self.error, MAX_ERROR_CHARS))


@dataclass(frozen=True, slots=True)
class EndpointState:
    """One endpoint as the ledger knows it: its current run of failures and when it was disabled."""

    endpoint: str
    failures: int = 0
    disabled_at_ms: int | None = None

    @property
    def disabled(self) -> bool:
        """Whether deliveries to the endpoint are gated off (until an operator enables it)."""
        return self.disabled_at_ms is not None


def next_state(
    state: EndpointState, attempt: WebhookAttempt, policy: LedgerPolicy
) -> EndpointState:
    """The rule every ledger applies in its one atomic record: a delivery ends the failure run, a
    failed or rejected attempt extends it and disables the endpoint when it reaches
    `disable_after`, a skipped one changes nothing; a disabled endpoint stays disabled."""
    failures = state.failures
    if attempt.status == "delivered":
        failures = 0
    elif attempt.status in FAILING_STATUSES:
        failures += 1
    disabled = state.disabled_at_ms
    if disabled is None and attempt.status in FAILING_STATUSES and failures >= policy.disable_after:
        disabled = attempt.at_ms
    return EndpointState(state.endpoint, failures, disabled)


@runtime_checkable
class WebhookLedger(Protocol):
    """Every delivery attempt (but a cancelled one) and each endpoint's state; each call is one
    atomic step on the backend.

    Writes no counter; each method's duties are tabled in docs/writing-a-driver.md.
    """

    async def record(self, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
        """Append `attempt` to its endpoint's attempts and move the endpoint's state by
        `next_state`, in one atomic step; trim the endpoint to its newest `policy.keep` attempts.
        Answers the endpoint's state after the record."""
        ...

    async def state(self, endpoint: str) -> EndpointState:
        """The endpoint's state (a fresh one, no failures and enabled, for an endpoint never seen)."""
        ...

    async def enable(self, endpoint: str) -> bool:
        """Enable the endpoint again and end its failure run; answers whether it was disabled."""
        ...

    async def attempts(self, endpoint: str, limit: int = 50) -> list[WebhookAttempt]:
        """The endpoint's attempts, newest (last recorded) first, at most `limit`."""
        ...


def attempts_limit(limit: object) -> int:
    """A listing's bound: 1 to `MAX_ATTEMPTS_PAGE`, or `OptionInvalidError`."""
    return finite_count("webhook attempts limit", limit, minimum=1, maximum=MAX_ATTEMPTS_PAGE)
