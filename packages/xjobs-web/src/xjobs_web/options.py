"""`DashboardOptions`: read-only mode, the auth and tenant hooks, the title and refresh, checked once."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from xjobs_web.errors import DashboardOptionInvalidError

# Given the request: whether it may see the dashboard (False: 401 with a basic-auth challenge).
AuthHook = Callable[[Request], bool | Awaitable[bool]]
# Given the request: the one tenant this operator may see and steer, or None for every tenant.
TenantHook = Callable[[Request], str | Awaitable[str | None] | None]

MIN_REFRESH_S = 1
MAX_REFRESH_S = 3600


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    """How a dashboard behaves. `read_only` renders no action and refuses every POST with 403."""

    read_only: bool = False
    auth: AuthHook | None = None
    tenant: TenantHook | None = None
    title: str = "xjobs"
    refresh_seconds: int = 5
    secure_cookies: bool = False
    csrf_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)


def resolve_options(**options: Any) -> DashboardOptions:
    """`DashboardOptions` from keyword options, each checked (`XJOBS_DASHBOARD_OPTION_INVALID`)."""
    known = set(DashboardOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise DashboardOptionInvalidError(
            f"unknown dashboard option {unknown[0]!r}; options are {', '.join(sorted(known))}"
        )
    resolved = DashboardOptions(**options)
    for name in ("read_only", "secure_cookies"):
        if not isinstance(getattr(resolved, name), bool):
            raise DashboardOptionInvalidError(f"{name} must be True or False")
    for name in ("auth", "tenant"):
        hook = getattr(resolved, name)
        if hook is not None and not callable(hook):
            raise DashboardOptionInvalidError(f"{name} must be a callable given the request")
    if not isinstance(resolved.title, str) or not 0 < len(resolved.title) <= 80:
        raise DashboardOptionInvalidError("title must be 1 to 80 characters")
    refresh = resolved.refresh_seconds
    if (
        isinstance(refresh, bool)
        or not isinstance(refresh, int)
        or not (refresh == 0 or MIN_REFRESH_S <= refresh <= MAX_REFRESH_S)
    ):
        raise DashboardOptionInvalidError(
            f"refresh_seconds is 0 (no live refresh) or {MIN_REFRESH_S} to {MAX_REFRESH_S}"
        )
    if not isinstance(resolved.csrf_secret, bytes) or len(resolved.csrf_secret) < 16:
        raise DashboardOptionInvalidError("csrf_secret must be at least 16 bytes")
    return resolved
