"""The Redis ceiling: bare redis-py and three minimal Lua scripts (enqueue, claim, batched settle)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import redis
from redis.asyncio import Redis

from bench.adapters.ceiling_worker import Claimed, batch_worker
from bench.contender import Contender, Engine, Target

LUA = Path(__file__).with_name("lua")
SEQ, READY, ACTIVE, WAKE = "ceiling:seq", "ceiling:ready", "ceiling:active", "ceiling:wake"
LEASE_MS = 30_000
IDLE_WAIT_S = 1


class CeilingRedis(Contender):
    library = "ceiling"
    engine: ClassVar[Engine] = "redis"

    def __init__(self) -> None:
        self.client: Redis | None = None
        self.waiter: Redis | None = None

    def version(self) -> str:
        return f"redis-py {redis.__version__}"

    def _client(self) -> Redis:
        assert self.client is not None
        return self.client

    async def open(self, target: Target) -> None:
        self.client = Redis.from_url(target.url)
        self.waiter = Redis.from_url(target.url)
        scripts = {
            name: (LUA / f"ceiling_{name}.lua").read_text()
            for name in ("enqueue", "claim", "settle")
        }
        self.scripts: dict[str, Any] = {
            name: self.client.register_script(text) for name, text in scripts.items()
        }

    async def close(self) -> None:
        for client in (self.client, self.waiter):
            if client is not None:
                await client.aclose()

    async def reset(self) -> None:
        await self._client().flushdb()

    async def enqueue(self, i: int, sent_at: float) -> None:
        payload = json.dumps({"i": i, "sent_at": sent_at})
        await self.scripts["enqueue"](keys=[SEQ, READY, WAKE], args=[payload])

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        payloads = [json.dumps({"i": i, "sent_at": sent_at}) for i, sent_at in items]
        await self.scripts["enqueue"](keys=[SEQ, READY, WAKE], args=payloads)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        waiter = self.waiter
        assert waiter is not None

        async def claim(limit: int) -> Claimed:
            lease_until = int(time.time() * 1000) + LEASE_MS
            flat = await self.scripts["claim"](
                keys=[READY, ACTIVE, WAKE], args=[limit, lease_until]
            )
            return [(flat[n], flat[n + 1].decode()) for n in range(0, len(flat), 2)]

        async def settle(ids: list[object]) -> None:
            await self.scripts["settle"](keys=[ACTIVE], args=ids)

        async def idle() -> None:
            await waiter.blpop([WAKE], timeout=IDLE_WAIT_S)

        async with batch_worker(concurrency, claim, settle, idle):
            yield

    async def unfinished(self) -> int:
        async with self._client().pipeline(transaction=False) as pipe:
            pipe.llen(READY)
            pipe.zcard(ACTIVE)
            ready, active = await pipe.execute()
        return int(ready) + int(active)
