"""The Redis `BackfillLedger`: one HASH of rows by run id and one of verdicts, sharing the ledger's hash tag; a script per write."""

from __future__ import annotations

import json
from typing import Any, cast

from xjobs.contract.backfills import (
    MAX_BACKFILL_ROWS,
    BackfillRow,
    BackfillStart,
    BackfillStatus,
    cut_error,
    finished_status,
    rows_limit,
)
from xjobs_redis.calls import backfills as calls
from xjobs_redis.executor import Executor
from xjobs_redis.keys import Keys


def _int(value: Any) -> int:
    return int(float(value))


def decode_row(text: str) -> BackfillRow:
    """One row's JSON as its wire record (Lua answers whole numbers as floats past 2^53 only)."""
    value = json.loads(text)
    finished = value.get("finished_at_ms")
    return BackfillRow(
        run_id=str(value["run_id"]),
        job_id=str(value["job_id"]),
        name=value["name"],
        checksum=value["checksum"],
        environment=value["environment"],
        tenant=value.get("tenant"),
        status=cast(BackfillStatus, value["status"]),
        cursor=value.get("cursor"),
        count=_int(value["count"]),
        batches=_int(value["batches"]),
        error=value.get("error"),
        started_at_ms=_int(value["started_at_ms"]),
        updated_at_ms=_int(value["updated_at_ms"]),
        finished_at_ms=None if finished is None else _int(finished),
    )


class RedisBackfillLedger:
    """Writes are `backfill_*.lua`; `get` is one HGET, `rows` one HGETALL (a ledger is small)."""

    def __init__(self, executor: Executor, keys: Keys) -> None:
        self._x = executor
        self._k = keys

    async def begin(self, start: BackfillStart) -> None:
        await self._x.run(calls.backfill_begin(self._k, now=self._x.now(), start=start))

    async def checkpoint(self, run_id: str, cursor: str | None, count: int, batches: int) -> bool:
        call = calls.backfill_checkpoint(
            self._k, now=self._x.now(), run_id=run_id, cursor=cursor, count=count, batches=batches
        )
        return bool(await self._x.run(call) == 1)

    async def finish(self, run_id: str, status: BackfillStatus, error: str | None) -> bool:
        status = finished_status(status)
        call = calls.backfill_finish(
            self._k, now=self._x.now(), run_id=run_id, status=status, error=cut_error(error)
        )
        return bool(await self._x.run(call) == 1)

    async def get(self, run_id: str) -> BackfillRow | None:
        key = self._k.backfills()
        (text,) = await self._x.batch([lambda pipe: pipe.hget(key, run_id)])
        return None if text is None else decode_row(str(text))

    async def rows(
        self, name: str | None = None, limit: int = MAX_BACKFILL_ROWS
    ) -> list[BackfillRow]:
        bound = rows_limit(limit)
        key = self._k.backfills()
        (found,) = await self._x.batch([lambda pipe: pipe.hgetall(key)])
        decoded = [decode_row(str(t)) for t in dict(found).values()]
        chosen = [r for r in decoded if name is None or r.name == name]
        chosen.sort(key=lambda r: (-r.started_at_ms, r.run_id))
        return chosen[:bound]

    async def completed(
        self, name: str, checksum: str, environment: str, tenant: str | None
    ) -> BackfillRow | None:
        call = calls.backfill_completed(
            self._k, name=name, checksum=checksum, environment=environment, tenant=tenant
        )
        text = await self._x.run(call)
        return None if not text else decode_row(str(text))
