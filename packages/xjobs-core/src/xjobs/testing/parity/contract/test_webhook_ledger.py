"""Parity: the webhook ledger (semantics.md, "Factories", `webhook()`): every attempt recorded, each endpoint's failure run and disablement."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from xjobs.contract.webhooks import (
    EndpointState,
    LedgerPolicy,
    WebhookAttempt,
    WebhookInvalidError,
    WebhookLedger,
    WebhookStatus,
)
from xjobs.errors import OptionInvalidError

if TYPE_CHECKING:
    from xjobs.testing.parity.env import ParityEnv

pytestmark = [pytest.mark.xjobs_parity, pytest.mark.requires("webhooks")]

ENDPOINT = "acme-orders"
POLICY = LedgerPolicy(disable_after=3, keep=100)


def _ledger(parity: ParityEnv) -> WebhookLedger:
    ledger = parity.backend.webhooks
    assert ledger is not None
    return ledger


def _attempt(
    parity: ParityEnv, status: WebhookStatus, n: int = 1, endpoint: str = ENDPOINT
) -> WebhookAttempt:
    http = {"delivered": 200, "failed": 503, "rejected": 410, "skipped": None}[status]
    return WebhookAttempt(
        endpoint=endpoint,
        message_id=f"msg_{n}",
        job_id=f"job-{n}",
        attempt=n,
        status=status,
        http_status=http,
        latency_ms=10 * n,
        excerpt=f"answer {n}",
        error=None if status == "delivered" else f"error {n}",
        at_ms=parity.clock.now_ms() + n,
    )


async def _record(
    parity: ParityEnv, statuses: list[WebhookStatus], policy: LedgerPolicy = POLICY
) -> list[EndpointState]:
    ledger = _ledger(parity)
    return [
        await ledger.record(_attempt(parity, status, n), policy)
        for n, status in enumerate(statuses, start=1)
    ]


async def test_an_endpoint_never_seen_is_enabled_with_no_failures_and_no_attempts(
    parity: ParityEnv,
) -> None:
    """Rule: the ledger answers a fresh state for an endpoint it has no row of."""
    ledger = _ledger(parity)
    assert await ledger.state(ENDPOINT) == EndpointState(ENDPOINT, 0, None)
    assert await ledger.attempts(ENDPOINT) == []


async def test_an_attempt_is_recorded_with_every_field_and_listed_newest_first(
    parity: ParityEnv,
) -> None:
    """Rule: each attempt (status, latency, response excerpt) is recorded; the newest is first."""
    first, second = _attempt(parity, "failed", 1), _attempt(parity, "delivered", 2)
    skipped = replace(_attempt(parity, "skipped", 3), excerpt="", latency_ms=0)
    for attempt in (first, second, skipped):
        await _ledger(parity).record(attempt, POLICY)
    assert await _ledger(parity).attempts(ENDPOINT) == [skipped, second, first]


async def test_failed_and_rejected_attempts_extend_the_run_a_delivery_ends_it(
    parity: ParityEnv,
) -> None:
    """Rule: failed and rejected extend the run of failures, delivered resets it, skipped leaves it."""
    states = await _record(parity, ["failed", "rejected", "skipped", "delivered", "failed"])
    assert [s.failures for s in states] == [1, 2, 2, 0, 1]
    assert [s.disabled for s in states] == [False] * 5
    assert await _ledger(parity).state(ENDPOINT) == states[-1]


async def test_the_endpoint_is_disabled_when_its_run_reaches_disable_after(
    parity: ParityEnv,
) -> None:
    """Rule: an endpoint is disabled after the declared run of failures, stamped with that attempt."""
    states = await _record(parity, ["failed", "failed", "rejected"])
    third = _attempt(parity, "rejected", 3)
    assert [s.disabled_at_ms for s in states] == [None, None, third.at_ms]
    assert await _ledger(parity).state(ENDPOINT) == EndpointState(ENDPOINT, 3, third.at_ms)


async def test_a_disabled_endpoint_stays_disabled_whatever_is_recorded_after(
    parity: ParityEnv,
) -> None:
    """Rule: only an operator's enable lifts a disablement (a delivery in flight does not)."""
    states = await _record(parity, ["failed", "failed", "failed", "failed", "delivered"])
    disabled_at = _attempt(parity, "failed", 3).at_ms
    assert [s.disabled_at_ms for s in states] == [None, None, disabled_at, disabled_at, disabled_at]
    assert [s.failures for s in states] == [1, 2, 3, 4, 0]


async def test_enable_lifts_the_disablement_and_ends_the_run(parity: ParityEnv) -> None:
    """Rule: enable answers whether the endpoint was disabled and resets its failure run."""
    await _record(parity, ["failed", "failed", "failed"])
    assert await _ledger(parity).enable(ENDPOINT) is True
    assert await _ledger(parity).state(ENDPOINT) == EndpointState(ENDPOINT, 0, None)
    assert await _ledger(parity).enable(ENDPOINT) is False
    assert await _ledger(parity).enable("never-seen") is False
    assert await _ledger(parity).state("never-seen") == EndpointState("never-seen", 0, None)


async def test_a_run_starts_again_from_zero_after_enable(parity: ParityEnv) -> None:
    """Rule: after enable the endpoint needs a whole new run of failures to be disabled again."""
    await _record(parity, ["failed", "failed", "failed"])
    await _ledger(parity).enable(ENDPOINT)
    states = await _record(parity, ["failed", "failed"])
    assert [(s.failures, s.disabled) for s in states] == [(1, False), (2, False)]


async def test_an_endpoint_keeps_only_its_newest_attempts(parity: ParityEnv) -> None:
    """Rule: a record trims its endpoint to the newest `keep` attempts."""
    await _record(parity, ["failed", "delivered", "failed", "delivered"], LedgerPolicy(5, keep=2))
    listed = await _ledger(parity).attempts(ENDPOINT)
    assert [a.message_id for a in listed] == ["msg_4", "msg_3"]


async def test_a_listing_answers_at_most_its_limit(parity: ParityEnv) -> None:
    """Rule: `attempts(limit=n)` answers the newest n; a limit out of bounds is refused."""
    await _record(parity, ["failed", "failed", "delivered"])
    assert [a.message_id for a in await _ledger(parity).attempts(ENDPOINT, 2)] == ["msg_3", "msg_2"]
    with pytest.raises(OptionInvalidError):
        await _ledger(parity).attempts(ENDPOINT, 0)


async def test_endpoints_are_independent(parity: ParityEnv) -> None:
    """Rule: the ledger is keyed by endpoint: one endpoint's run never moves another's."""
    ledger = _ledger(parity)
    for n in (1, 2, 3):
        await ledger.record(_attempt(parity, "failed", n, "endpoint-a"), POLICY)
    await ledger.record(_attempt(parity, "delivered", 4, "endpoint-b"), POLICY)
    assert (await ledger.state("endpoint-a")).disabled is True
    assert await ledger.state("endpoint-b") == EndpointState("endpoint-b", 0, None)
    assert [a.message_id for a in await ledger.attempts("endpoint-b")] == ["msg_4"]


async def test_an_excerpt_is_stored_alike_on_every_backend(parity: ParityEnv) -> None:
    """Rule: an excerpt with a NUL or a lone surrogate is stored with replacement characters."""
    attempt = replace(_attempt(parity, "rejected"), excerpt="bad\x00 \ud800 ünïcode")
    await _ledger(parity).record(attempt, POLICY)
    (stored,) = await _ledger(parity).attempts(ENDPOINT)
    assert stored.excerpt == "bad\ufffd ? ünïcode" == attempt.excerpt


async def test_a_bad_endpoint_id_is_refused_before_anything_is_written(parity: ParityEnv) -> None:
    """Rule: bad input is an `XJobsError` with a stable code before anything is written."""
    with pytest.raises(WebhookInvalidError):
        await _ledger(parity).state("has space")
    with pytest.raises(WebhookInvalidError):
        replace(_attempt(parity, "failed"), endpoint="{tag}")
    assert await _ledger(parity).attempts(ENDPOINT) == []
