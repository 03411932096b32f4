"""The memory webhook ledger: each endpoint's state and its newest attempts, in one process."""

from __future__ import annotations

from collections import deque

from xjobs.contract.webhooks import (
    EndpointState,
    LedgerPolicy,
    WebhookAttempt,
    attempts_limit,
    endpoint_id,
    next_state,
)


class MemoryWebhookLedger:
    """States by endpoint id; attempts oldest first, trimmed to the policy's `keep` at each record."""

    def __init__(self) -> None:
        self._states: dict[str, EndpointState] = {}
        self._attempts: dict[str, deque[WebhookAttempt]] = {}

    async def record(self, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
        state = next_state(await self.state(attempt.endpoint), attempt, policy)
        self._states[attempt.endpoint] = state
        kept = self._attempts.setdefault(attempt.endpoint, deque())
        kept.append(attempt)
        while len(kept) > policy.keep:
            kept.popleft()
        return state

    async def state(self, endpoint: str) -> EndpointState:
        return self._states.get(endpoint_id(endpoint), EndpointState(endpoint))

    async def enable(self, endpoint: str) -> bool:
        state = await self.state(endpoint)
        if endpoint in self._states:
            self._states[endpoint] = EndpointState(endpoint)
        return state.disabled

    async def attempts(self, endpoint: str, limit: int = 50) -> list[WebhookAttempt]:
        limit = attempts_limit(limit)
        kept = self._attempts.get(endpoint_id(endpoint), deque())
        return list(reversed(kept))[:limit]
