"""`backfill()`: a factory over `job()` — a sweep over a data set in batches, its declaration, checksum and input."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from xjobs.declare.job import JobHandle, job
from xjobs.declare.retry import Retry
from xjobs.factories.backfill_errors import BackfillInvalidError
from xjobs.factories.backfill_pass import Count, Fetch, Handle, LedgerSource, Source, backfill_pass
from xjobs.factories.backfill_rate import rate_interval_s
from xjobs.factories.backfill_registry import stamp_backfill
from xjobs.factories.backfill_scope import ScopedInput, sweep_scope
from xjobs.factories.backfill_spec import BackfillSpec, checksum_of, spec_parts
from xjobs.names import DEFAULT_QUEUE, validate_job_name
from xjobs.options import finite_count
from xjobs.run.context import JobContext

T = TypeVar("T")
MAX_BATCH = 10_000


class BackfillInput(ScopedInput):
    """A sweep's input: the tenant it sweeps (`tenant="input"`), or nothing (`tenant="none"`)."""


def _tenant_key(value: BackfillInput) -> str:
    return value.tenant or "none"


def backfill(
    name: str,
    *,
    fetch: Fetch[T],
    handle: Handle[T],
    ledger: LedgerSource,
    tenant: str = "none",
    batch: int = 100,
    version: str = "1",
    environments: Sequence[str] | None = None,
    requires: Sequence[str] = (),
    rate: float | None = None,
    count: Count | None = None,
    queue: str = DEFAULT_QUEUE,
    retry: Retry | None = None,
    timeout: timedelta | None = None,
) -> JobHandle[BackfillInput]:
    """A sweep as a job: `fetch(cursor, batch, tenant)` answers a `Page` (its items and the next
    cursor, `None` at the end) and `handle(items, tenant)` does the work, AT LEAST ONCE (a batch
    cut short by a crash runs again). Each batch is a durable step named by its position that
    persists the cursor and the running count, never the page; a batch that ran checkpoints the
    run's row of `ledger()` (a replayed one writes nothing). `tenant="none"` sweeps every tenant
    (the only cross-tenant scope); `tenant="input"` sweeps the tenant its input names.

    `environments` (default: all) is checked by the pass and by `gate_backfill`, `requires`
    (sweeps that must have completed first) by `gate_backfill` only; a run skips a declaration
    (name and `version`) that already completed in its environment; `rate` caps batches per
    second, spent inside the batch's step; `count(tenant)`, read after the last batch, must
    answer 0 rows left (else `XJOBS_BACKFILL_STALLED`). One live run per scope at a time.
    """
    name = validate_job_name(name, what="backfill")
    scope = sweep_scope(tenant, what=f"backfill {name!r}")
    size = finite_count("backfill batch", batch, minimum=1, maximum=MAX_BATCH)
    version, envs, needs = spec_parts(name, version, environments, requires)
    if not callable(fetch) or not callable(handle) or not callable(ledger):
        raise BackfillInvalidError(f"backfill {name!r} needs callable fetch, handle and ledger")
    spec = BackfillSpec(
        name=name,
        version=version,
        checksum=checksum_of(name, version, scope),
        scope=scope,
        environments=envs,
        requires=needs,
        batch=size,
        interval_s=rate_interval_s(rate),
    )
    source = Source(fetch=fetch, handle=handle, count=count)

    async def body(ctx: JobContext, value: BackfillInput) -> dict[str, Any]:
        return await backfill_pass(ctx, spec, source, ledger, value)

    handle_: JobHandle[BackfillInput] = job(
        body,
        tenant="none" if scope == "none" else (lambda v: v.tenant or ""),
        idempotency_key=lambda v: f"{spec.checksum}:{_tenant_key(v)}",
        name=name,
        queue=queue,
        input_model=BackfillInput,
        retry=retry if retry is not None else Retry(attempts=5),
        timeout=timeout,
    )
    stamp_backfill(handle_, spec)
    return handle_
