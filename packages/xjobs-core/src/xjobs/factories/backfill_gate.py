"""May this sweep run here and now: its environment, what it `requires`, and whether it already completed here."""

from __future__ import annotations

import os
from typing import Final

from xjobs.contract.backfills import BackfillLedger
from xjobs.factories.backfill_errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillRequiresError,
)
from xjobs.factories.backfill_spec import BackfillSpec, validate_environment

ENVIRONMENT_VARIABLE: Final = "XJOBS_ENVIRONMENT"
DEFAULT_ENVIRONMENT: Final = "development"


def current_environment() -> str:
    """The environment this process runs in: `XJOBS_ENVIRONMENT`, else `development`."""
    return validate_environment(os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_ENVIRONMENT)


def refuse_environment(spec: BackfillSpec, environment: str) -> None:
    """`BackfillEnvironmentError` when `spec` is not declared for `environment` (pass and gate)."""
    if not spec.runs_in(environment):
        raise BackfillEnvironmentError(
            f"backfill {spec.name!r} runs in {', '.join(spec.environments or ())}, "
            f"not in {environment!r}"
        )


async def _required_done(ledger: BackfillLedger, name: str, environment: str) -> bool:
    rows = await ledger.rows(name)
    return any(r.status == "completed" and r.environment == environment for r in rows)


async def gate_backfill(
    spec: BackfillSpec,
    ledger: BackfillLedger,
    *,
    environment: str | None = None,
    tenant: str | None = None,
) -> None:
    """Refuse a sweep that may not start here: not declared for the environment
    (`XJOBS_BACKFILL_ENVIRONMENT`), a sweep it requires not completed here
    (`XJOBS_BACKFILL_REQUIRES`), or this declaration already completed here for this tenant
    (`XJOBS_BACKFILL_APPLIED`; a failed or running run does not block)."""
    env = validate_environment(environment) if environment is not None else current_environment()
    refuse_environment(spec, env)
    for name in spec.requires:
        if not await _required_done(ledger, name, env):
            raise BackfillRequiresError(
                f"backfill {spec.name!r} requires {name!r}, which has not completed in {env!r}"
            )
    done = await ledger.completed(spec.name, spec.checksum, env, tenant)
    if done is not None:
        raise BackfillAppliedError(
            f"backfill {spec.name!r} already completed in {env!r} (run {done.run_id})"
        )
