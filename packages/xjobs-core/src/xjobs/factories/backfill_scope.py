"""Which sweeps run across tenants: `tenant="none"` only; any other sweep runs for the one tenant its input names."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel

from xjobs.factories.backfill_errors import BackfillScopeError

Scope = Literal["none", "input"]
SCOPES: Final[tuple[Scope, ...]] = ("none", "input")


class ScopedInput(BaseModel):
    """A sweep's or export's input: the one tenant it acts for (`None` on a cross-tenant sweep)."""

    tenant: str | None = None


def sweep_scope(tenant: object, *, what: str) -> Scope:
    """`"none"` (cross-tenant: the only such scope) or `"input"` (the input's tenant), else refused."""
    if tenant == "none" or tenant == "input":
        return tenant
    raise BackfillScopeError(
        f'{what} tenant={tenant!r}: "none" sweeps every tenant (the only cross-tenant scope), '
        '"input" sweeps the one tenant its input names'
    )


def tenant_of(scope: Scope, value: ScopedInput, *, what: str) -> str | None:
    """The tenant one run acts for: none on a cross-tenant sweep, else the input's own (required)."""
    if scope == "none":
        if value.tenant is not None:
            raise BackfillScopeError(
                f'{what} sweeps every tenant (tenant="none"); its input names no tenant, '
                f"got {value.tenant!r}"
            )
        return None
    if not value.tenant:
        raise BackfillScopeError(f'{what} sweeps one tenant (tenant="input"); its input names none')
    return value.tenant
