"""Declared minus completed, per environment: the sweeps still to run, which `xjobs backfills --pending` reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xjobs.contract.backfills import BackfillLedger
from xjobs.factories.backfill_spec import BackfillSpec, validate_environment


@dataclass(frozen=True, slots=True)
class PendingBackfill:
    """A cross-tenant sweep declared for `environment` with no completed run there (of its checksum)."""

    name: str
    environment: str
    checksum: str


async def pending_backfills(
    specs: Iterable[BackfillSpec], ledger: BackfillLedger, environments: Sequence[str]
) -> list[PendingBackfill]:
    """The registry (what EXISTS) minus the ledger (what RAN to completion), per environment.

    A sweep with `tenant="input"` is left out: the registry cannot know which tenants it owes.
    """
    envs = sorted({validate_environment(e) for e in environments})
    pending: list[PendingBackfill] = []
    for spec in sorted(specs, key=lambda s: s.name):
        if spec.scope != "none":
            continue
        for env in envs:
            if (
                spec.runs_in(env)
                and await ledger.completed(spec.name, spec.checksum, env, None) is None
            ):
                pending.append(PendingBackfill(spec.name, env, spec.checksum))
    return pending
