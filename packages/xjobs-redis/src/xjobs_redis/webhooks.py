"""The Redis `WebhookLedger`: each endpoint's state HASH and attempts LIST under a hash tag of its own (`keys`)."""

from __future__ import annotations

import json
from typing import Any, cast

from xjobs.contract.webhooks import (
    EndpointState,
    LedgerPolicy,
    WebhookAttempt,
    WebhookStatus,
    attempts_limit,
    endpoint_id,
)
from xjobs_redis.calls import webhooks
from xjobs_redis.executor import AnyPipeline, Executor
from xjobs_redis.keys import Keys


def _ms(value: Any) -> int | None:
    return None if value in (None, "") else int(value)


def _attempt(endpoint: str, entry: str) -> WebhookAttempt:
    row = json.loads(entry)
    return WebhookAttempt(
        endpoint=endpoint,
        message_id=row["message_id"],
        job_id=row["job_id"],
        attempt=int(row["attempt"]),
        status=cast(WebhookStatus, row["status"]),
        http_status=row["http_status"],
        latency_ms=int(row["latency_ms"]),
        excerpt=row["excerpt"],
        error=row["error"],
        at_ms=int(row["at_ms"]),
    )


class RedisWebhookLedger:
    """A record is one script on the endpoint's slot; the reads are plain commands."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def record(self, attempt: WebhookAttempt, policy: LedgerPolicy) -> EndpointState:
        call = webhooks.webhook_record(self._k, attempt=attempt, policy=policy)
        failures, disabled = await self._x.run(call)
        return EndpointState(attempt.endpoint, int(failures), _ms(disabled))

    async def state(self, endpoint: str) -> EndpointState:
        key = self._k.webhook_state(endpoint_id(endpoint))

        def read(pipe: AnyPipeline) -> object:
            return pipe.hmget(key, "failures", "disabled_at_ms")

        ((failures, disabled),) = await self._x.batch([read])
        return EndpointState(endpoint, int(failures or 0), _ms(disabled))

    async def enable(self, endpoint: str) -> bool:
        return bool(await self._x.run(webhooks.webhook_enable(self._k, endpoint=endpoint)))

    async def attempts(self, endpoint: str, limit: int = 50) -> list[WebhookAttempt]:
        key, last = self._k.webhook_attempts(endpoint_id(endpoint)), attempts_limit(limit) - 1

        def read(pipe: AnyPipeline) -> object:
            return pipe.lrange(key, 0, last)

        (entries,) = await self._x.batch([read])
        return [_attempt(endpoint, entry) for entry in entries]
