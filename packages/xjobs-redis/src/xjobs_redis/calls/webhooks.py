"""The webhook ledger's calls: one endpoint's record and its enabling, both on the endpoint's own slot."""

from __future__ import annotations

import json

from xjobs.contract.webhooks import LedgerPolicy, WebhookAttempt
from xjobs_redis.executor import Arg, Call
from xjobs_redis.keys import Keys


def _attempt_json(attempt: WebhookAttempt) -> str:
    """An attempt as its LIST entry (the endpoint is the key's, so it is not repeated)."""
    return json.dumps(
        {
            "message_id": attempt.message_id,
            "job_id": attempt.job_id,
            "attempt": attempt.attempt,
            "status": attempt.status,
            "http_status": attempt.http_status,
            "latency_ms": attempt.latency_ms,
            "excerpt": attempt.excerpt,
            "error": attempt.error,
            "at_ms": attempt.at_ms,
        },
        ensure_ascii=False,
    )


def webhook_record(k: Keys, *, attempt: WebhookAttempt, policy: LedgerPolicy) -> Call:
    """Append one attempt and move its endpoint's state, trimmed to the newest `policy.keep`."""
    keys = [k.webhook_state(attempt.endpoint), k.webhook_attempts(attempt.endpoint)]
    args: list[Arg] = [
        _attempt_json(attempt),
        attempt.status,
        attempt.at_ms,
        policy.disable_after,
        policy.keep,
    ]
    return Call("webhook_record", keys, args)


def webhook_enable(k: Keys, *, endpoint: str) -> Call:
    """Enable one endpoint again and end its run of failures."""
    return Call("webhook_enable", [k.webhook_state(endpoint)], [])
