"""The Postgres ceiling: bare asyncpg, one skip-locked claim statement and one batched settle."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import ClassVar

import asyncpg

from bench.adapters.ceiling_worker import Claimed, batch_worker
from bench.contender import Contender, Engine, Target

CHANNEL = "ceiling_jobs"
IDLE_WAIT_S = 1.0

DDL = """
create table ceiling_jobs (
    id bigserial primary key,
    queue text not null,
    payload jsonb not null,
    state smallint not null default 0,
    run_at timestamptz not null default now()
);
create index ceiling_jobs_due on ceiling_jobs (queue, run_at, id) where state = 0
"""
ENQUEUE = """
with job as (insert into ceiling_jobs (queue, payload) values ($1, $2::jsonb) returning id)
select pg_notify('ceiling_jobs', $1) from job
"""
ENQUEUE_BULK = """
with jobs as (
    insert into ceiling_jobs (queue, payload) select $1, p::jsonb from unnest($2::text[]) as p
    returning id
)
select pg_notify('ceiling_jobs', $1) where exists (select 1 from jobs)
"""
CLAIM = """
update ceiling_jobs j set state = 1
from (
    select id from ceiling_jobs
    where queue = $1 and state = 0 and run_at <= now()
    order by run_at, id
    for update skip locked
    limit $2
) due
where j.id = due.id
returning j.id, j.payload::text
"""
SETTLE = "update ceiling_jobs set state = 2 where id = any($1::bigint[])"
UNFINISHED = "select count(*) from ceiling_jobs where state < 2 and run_at <= now()"
RESET = "truncate ceiling_jobs"
FILL = """
insert into ceiling_jobs (queue, payload, state, run_at)
select 'bench', jsonb_build_object('i', g, 'sent_at', 0),
       case when g % 2 = 0 then 2 else 0 end,
       now() + case when g % 2 = 0 then interval '0' else interval '1 day' end
from generate_series(1, $1::int) as g
"""
EXPLAIN = "explain (analyze, costs off, timing off) "


async def _no_reset(conn: asyncpg.Connection) -> None:
    return None


class CeilingPostgres(Contender):
    library = "ceiling"
    engine: ClassVar[Engine] = "postgres"

    def __init__(self) -> None:
        self.pool: asyncpg.Pool | None = None

    def version(self) -> str:
        return f"asyncpg {asyncpg.__version__}"

    def _pool(self) -> asyncpg.Pool:
        assert self.pool is not None
        return self.pool

    async def open(self, target: Target) -> None:
        # no reset statements on release: they would count in W5 and cost W1 a round trip
        self.pool = await asyncpg.create_pool(target.url, min_size=2, max_size=4, reset=_no_reset)
        await self._pool().execute(DDL)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def reset(self) -> None:
        await self._pool().execute(RESET)

    async def enqueue(self, i: int, sent_at: float) -> None:
        await self._pool().execute(ENQUEUE, self.queue, json.dumps({"i": i, "sent_at": sent_at}))

    async def enqueue_bulk(self, items: Sequence[tuple[int, float]]) -> None:
        payloads = [json.dumps({"i": i, "sent_at": sent_at}) for i, sent_at in items]
        await self._pool().execute(ENQUEUE_BULK, self.queue, payloads)

    @contextlib.asynccontextmanager
    async def worker(self, concurrency: int) -> AsyncIterator[None]:
        pool = self._pool()
        woken = asyncio.Event()
        listener = await pool.acquire()

        def on_notify(*_: object) -> None:
            woken.set()

        await listener.add_listener(CHANNEL, on_notify)

        async def claim(limit: int) -> Claimed:
            woken.clear()
            return [(row[0], row[1]) for row in await pool.fetch(CLAIM, self.queue, limit)]

        async def settle(ids: list[object]) -> None:
            await pool.execute(SETTLE, ids)

        async def idle() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), IDLE_WAIT_S)

        try:
            async with batch_worker(concurrency, claim, settle, idle):
                yield
        finally:
            await listener.remove_listener(CHANNEL, on_notify)
            await pool.release(listener)

    async def unfinished(self) -> int:
        count: int = await self._pool().fetchval(UNFINISHED)
        return count

    async def fill(self, n: int) -> None:
        await self._pool().execute(FILL, n)
        await self._pool().execute("analyze ceiling_jobs")

    async def explain_claim(self) -> str:
        async with self._pool().acquire() as conn:
            transaction = conn.transaction()
            await transaction.start()
            try:
                rows = await conn.fetch(EXPLAIN + CLAIM, self.queue, 10)
            finally:
                await transaction.rollback()
        return "\n".join(row[0] for row in rows)
