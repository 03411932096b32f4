"""The webhook ledger: each endpoint's state and its newest attempts, a record one write transaction."""

from __future__ import annotations

from xjobs.contract.webhooks import (
    EndpointState,
    LedgerPolicy,
    WebhookAttempt,
    attempts_limit,
    endpoint_id,
    next_state,
)
from xjobs_sqlite.connection import Connection
from xjobs_sqlite.executor import Executor
from xjobs_sqlite.sql import sql


def _state(conn: Connection, endpoint: str) -> EndpointState:
    row = conn.execute(sql("webhook_state"), {"endpoint": endpoint}).fetchone()
    return EndpointState(endpoint) if row is None else EndpointState(endpoint, row[0], row[1])


def _record(conn: Connection, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
    state = next_state(_state(conn, attempt.endpoint), attempt, policy)
    conn.execute(
        sql("webhook_state_put"),
        {
            "endpoint": state.endpoint,
            "failures": state.failures,
            "disabled_at_ms": state.disabled_at_ms,
        },
    )
    conn.execute(
        sql("webhook_attempt_add"),
        {
            "endpoint": attempt.endpoint,
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
    )
    conn.execute(sql("webhook_trim"), {"endpoint": attempt.endpoint, "keep": policy.keep})
    return state


def _enable(conn: Connection, endpoint: str) -> bool:
    was = _state(conn, endpoint)
    conn.execute(sql("webhook_enable"), {"endpoint": endpoint})
    return was.disabled


class SqliteWebhookLedger:
    """`WebhookLedger` over `webhook_endpoints` and `webhook_attempts`."""

    def __init__(self, executor: Executor) -> None:
        self._x = executor

    async def record(self, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
        """Append the attempt and move its endpoint's state, atomically."""
        return await self._x.write(lambda conn: _record(conn, attempt, policy))

    async def state(self, endpoint: str) -> EndpointState:
        """The endpoint's state (fresh for one never seen)."""
        endpoint = endpoint_id(endpoint)
        return await self._x.read(lambda conn: _state(conn, endpoint))

    async def enable(self, endpoint: str) -> bool:
        """Enable the endpoint and end its failure run; whether it was disabled."""
        endpoint = endpoint_id(endpoint)
        return await self._x.write(lambda conn: _enable(conn, endpoint))

    async def attempts(self, endpoint: str, limit: int = 50) -> list[WebhookAttempt]:
        """The endpoint's attempts, newest first."""
        params = {"endpoint": endpoint_id(endpoint), "limit": attempts_limit(limit)}
        rows = await self._x.read(
            lambda conn: conn.execute(sql("webhook_attempts"), params).fetchall()
        )
        return [WebhookAttempt(*row) for row in rows]
