"""The Postgres `WebhookLedger`: `<schema>.webhook_endpoints` and `webhook_attempts`, the statements of `sql/webhooks.sql`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from xjobs.contract.webhooks import (
    EndpointState,
    LedgerPolicy,
    WebhookAttempt,
    WebhookStatus,
    attempts_limit,
    endpoint_id,
)
from xjobs_pg.executor import Executor
from xjobs_pg.params import Bound, One


@dataclass(frozen=True, slots=True)
class RecordParams:
    """`webhook_record`: the attempt's columns, then the policy, in `$n` order."""

    attempt: WebhookAttempt
    policy: LedgerPolicy

    def bind(self) -> Bound:
        a = self.attempt
        return (
            a.endpoint,
            a.message_id,
            a.job_id,
            a.attempt,
            a.status,
            a.http_status,
            a.latency_ms,
            a.excerpt,
            a.error,
            a.at_ms,
            self.policy.disable_after,
            self.policy.keep,
        )


@dataclass(frozen=True, slots=True)
class AttemptsParams:
    """`webhook_attempts`: $1 endpoint, $2 limit."""

    endpoint: str
    limit: int

    def bind(self) -> Bound:
        return (self.endpoint, self.limit)


def _ms(value: object) -> int | None:
    return None if value is None else int(cast(int, value))


class PostgresWebhookLedger:
    """Each call is one statement; a record serialises on its endpoint's row."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def record(self, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
        row = await self._x.fetchrow("webhook_record", RecordParams(attempt, policy))
        assert row is not None  # the upsert always answers its row
        return EndpointState(attempt.endpoint, int(row["failures"]), _ms(row["disabled_at_ms"]))

    async def state(self, endpoint: str) -> EndpointState:
        row = await self._x.fetchrow("webhook_state", One(endpoint_id(endpoint)))
        if row is None:
            return EndpointState(endpoint)
        return EndpointState(endpoint, int(row["failures"]), _ms(row["disabled_at_ms"]))

    async def enable(self, endpoint: str) -> bool:
        row = await self._x.fetchrow("webhook_enable", One(endpoint_id(endpoint)))
        return row is not None and bool(row["was_disabled"])

    async def attempts(self, endpoint: str, limit: int = 50) -> list[WebhookAttempt]:
        params = AttemptsParams(endpoint_id(endpoint), attempts_limit(limit))
        return [
            WebhookAttempt(
                endpoint=endpoint,
                message_id=row["message_id"],
                job_id=row["job_id"],
                attempt=int(row["attempt"]),
                status=cast(WebhookStatus, row["status"]),
                http_status=None if row["http_status"] is None else int(row["http_status"]),
                latency_ms=int(row["latency_ms"]),
                excerpt=row["excerpt"],
                error=row["error"],
                at_ms=int(row["at_ms"]),
            )
            for row in await self._x.fetch("webhook_attempts", params)
        ]
