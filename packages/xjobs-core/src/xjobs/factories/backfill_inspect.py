"""The ledger projected for the CLI (`xjobs backfills`) and any other reader: the ONE projection of a row and a declaration."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xjobs.contract.backend import Backend
from xjobs.contract.backfills import BackfillLedger, BackfillRow
from xjobs.contract.driver import JobRecord
from xjobs.factories.backfill_pending import PendingBackfill
from xjobs.factories.backfill_spec import BackfillSpec
from xjobs.operate.operator import Operator


def project_row(row: BackfillRow) -> dict[str, Any]:
    """One run as JSON-safe fields (the cursor as its stored JSON text)."""
    return {
        "run_id": row.run_id,
        "job_id": row.job_id,
        "name": row.name,
        "checksum": row.checksum,
        "environment": row.environment,
        "tenant": row.tenant,
        "status": row.status,
        "cursor": row.cursor,
        "count": row.count,
        "batches": row.batches,
        "error": row.error,
        "started_at_ms": row.started_at_ms,
        "updated_at_ms": row.updated_at_ms,
        "finished_at_ms": row.finished_at_ms,
    }


def project_spec(spec: BackfillSpec) -> dict[str, Any]:
    """One declaration as JSON-safe fields."""
    return {
        "name": spec.name,
        "version": spec.version,
        "checksum": spec.checksum,
        "tenant": spec.scope,
        "environments": list(spec.environments) if spec.environments is not None else None,
        "requires": list(spec.requires),
        "batch": spec.batch,
    }


def project_pending(item: PendingBackfill) -> dict[str, Any]:
    """One pending sweep as JSON-safe fields."""
    return {"name": item.name, "environment": item.environment, "checksum": item.checksum}


async def inspect_backfills(
    specs: Iterable[BackfillSpec], ledger: BackfillLedger, pending: Iterable[PendingBackfill]
) -> dict[str, Any]:
    """What EXISTS (`declared`), what RAN (`runs`, newest first) and the diff (`pending`)."""
    return {
        "declared": [project_spec(s) for s in sorted(specs, key=lambda s: s.name)],
        "runs": [project_row(r) for r in await ledger.rows()],
        "pending": [project_pending(p) for p in pending],
    }


async def backfill_run(
    backend: Backend, operator: Operator, record: JobRecord
) -> dict[str, Any] | None:
    """The backfill ledger's run that job `record` is (`None`: it runs no sweep, or the backend
    keeps no ledger): a sweep's runs are jobs of its name, each row naming its job. The CLI's
    `jobs show`, the dashboard's job page and the MCP server's `show_job` all read it so."""
    if "backfills" not in backend.capabilities:
        return None
    for row in await operator.backfills(record.name):
        if row.job_id == record.id:
            return project_row(row)
    return None
