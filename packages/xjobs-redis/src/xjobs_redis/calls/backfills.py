"""The backfill ledger scripts' calls: begin, checkpoint and finish a run, and read the verdict."""

from __future__ import annotations

import json

from xjobs.contract.backfills import BackfillStart
from xjobs_redis.executor import Call
from xjobs_redis.keys import Keys


def backfill_begin(k: Keys, *, now: str, start: BackfillStart) -> Call:
    """Record a run `running` (a new row at zero, or an existing row begun again)."""
    row = {
        "run_id": start.run_id,
        "job_id": start.job_id,
        "name": start.name,
        "checksum": start.checksum,
        "environment": start.environment,
        "tenant": start.tenant,
    }
    return Call(
        "backfill_begin", [k.backfills()], [now, start.run_id, json.dumps(row, ensure_ascii=False)]
    )


def backfill_checkpoint(
    k: Keys, *, now: str, run_id: str, cursor: str | None, count: int, batches: int
) -> Call:
    """Move a running row to the position after a batch that ran."""
    field = json.dumps(cursor, ensure_ascii=False)
    return Call("backfill_checkpoint", [k.backfills()], [now, run_id, field, count, batches])


def backfill_finish(k: Keys, *, now: str, run_id: str, status: str, error: str | None) -> Call:
    """Settle a run `completed` (then the verdict of its declaration, if none is) or `failed`."""
    keys = [k.backfills(), k.backfill_verdicts()]
    return Call(
        "backfill_finish", keys, [now, run_id, status, json.dumps(error, ensure_ascii=False)]
    )


def backfill_completed(
    k: Keys, *, name: str, checksum: str, environment: str, tenant: str | None
) -> Call:
    """Read the earliest completed row of a declaration in an environment for a tenant."""
    asked = {"name": name, "checksum": checksum, "environment": environment, "tenant": tenant}
    keys = [k.backfills(), k.backfill_verdicts()]
    return Call("backfill_completed", keys, [json.dumps(asked, ensure_ascii=False)])
