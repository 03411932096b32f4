"""What tenant a run acts under: the declaration's `tenant=` resolved once, and the org a run derives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from xjobs.declare.keys import derive_str
from xjobs.errors import TenantRequiredError

NO_TENANT: Literal["none"] = "none"


@dataclass(frozen=True, slots=True)
class JobTenant:
    """A job's tenant rule: a callable `input -> org id`, or `None` for a cross-tenant job (`"none"`)."""

    derive: Callable[[Any], str] | None

    def org_for(self, value: Any, *, job: str) -> str | None:
        """The org a run of this input acts for; `None` when the job declared `"none"`."""
        if self.derive is None:
            return None
        return derive_str(self.derive, value, what="tenant", job=job)


def resolve_tenant(tenant: object, *, job: str) -> JobTenant:
    """`tenant=` as declared: a callable or the string "none"; anything else is refused."""
    if tenant == NO_TENANT:
        return JobTenant(derive=None)
    if callable(tenant):
        return JobTenant(derive=tenant)
    raise TenantRequiredError(
        f"job {job!r} must declare tenant= as a callable (input -> org id) or the string 'none', "
        f"got {tenant!r}"
    )
