"""The backfill kill -9 test's app: a sweep of 30 ids in batches of 3, on the backend `$XJOBS_E2E_URL` names.

Each fetch appends `fetch <attempt> <cursor>` and each handled batch `handled <ids>` to
`$XJOBS_E2E_CALLS`. On the first attempt, the batch holding id 10 is handled, then
`$XJOBS_E2E_MID` is written and the batch hangs inside its step, for the test to kill the worker.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import xjobs
from xjobs.factories import Page, backfill

TOTAL = 30
BATCH = 3
KILL_AT = 10
ATTEMPT: list[int] = [0]


def _append(line: str) -> None:
    with Path(os.environ["XJOBS_E2E_CALLS"]).open("a") as calls:
        calls.write(f"{line}\n")


async def fetch(cursor: Any, limit: int, tenant: str | None) -> Page[int]:
    await asyncio.to_thread(_append, f"fetch {os.getpid()} {cursor}")
    after = 0 if cursor is None else int(cursor)
    ids = list(range(after + 1, min(after + limit, TOTAL) + 1))
    return Page(ids, ids[-1] if ids and ids[-1] < TOTAL else None)


async def handle(ids: list[int], tenant: str | None) -> None:
    await asyncio.to_thread(_append, "handled " + " ".join(map(str, ids)))
    mid = Path(os.environ["XJOBS_E2E_MID"])
    if KILL_AT in ids and not await asyncio.to_thread(mid.exists):
        await asyncio.to_thread(mid.write_text, "mid-sweep")
        await asyncio.sleep(3600)  # the test kills the worker here, inside the batch's step


sweep = backfill(
    "sweep_ids", fetch=fetch, handle=handle, batch=BATCH, ledger=lambda: app.backend.backfills
)

app: xjobs.App = xjobs.App(backend=os.environ.get("XJOBS_E2E_URL", "memory://"), jobs=[sweep])
