"""`DashboardOptions`: read-only mode, the auth and tenant hooks, the trusted hosts, the title and
refresh, checked once; a dashboard nobody authenticates is refused unless it only looks, on loopback."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from starlette.requests import Request

from xjobs_web.errors import DashboardAuthRequiredError, DashboardOptionInvalidError
from xjobs_web.hosts import ANY, Hosts


class AllTenants(Enum):
    """The type of `ALL_TENANTS` (an enum of one member, so no tenant id can be mistaken for it)."""

    ALL_TENANTS = "all tenants"


ALL_TENANTS = AllTenants.ALL_TENANTS
"""The tenant hook's answer for an operator granted every tenant (None or "" denies the request)."""

AuthHook = Callable[[Request], bool | Awaitable[bool]]
"""Given the request: whether it may see the dashboard (False: 401 with a basic-auth challenge)."""
TenantAnswer = str | AllTenants | None
TenantHook = Callable[[Request], TenantAnswer | Awaitable[TenantAnswer]]
"""Given the (authenticated) request: the one tenant this operator may see and steer, `ALL_TENANTS`
for every tenant; None or "" denies the request (403)."""

MIN_REFRESH_S = 1
MAX_REFRESH_S = 3600


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    """How a dashboard behaves. `read_only` renders no action and refuses every POST with 403."""

    read_only: bool = False
    auth: AuthHook | None = None
    unsafe_no_auth: bool = False
    allowed_hosts: tuple[str, ...] = ()
    tenant: TenantHook | None = None
    title: str = "xjobs"
    refresh_seconds: int = 5
    secure_cookies: bool = False
    csrf_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)


@dataclass(frozen=True, slots=True)
class Binding:
    """Where `xjobs web` serves the dashboard alone (a mounted dashboard has none)."""

    host: str
    port: int
    loopback: bool


def _hosts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple | set | frozenset) or not all(
        isinstance(v, str) for v in value
    ):
        raise DashboardOptionInvalidError(
            "allowed_hosts is a list of host names, e.g. ['jobs.example.com'] (['*']: any)"
        )
    return tuple(v.strip().lower() for v in value)


def _check_auth(resolved: DashboardOptions, binding: Binding | None) -> None:
    """Refuse a dashboard nobody authenticates, unless it only looks and only loopback reaches it."""
    if resolved.auth is not None and resolved.unsafe_no_auth:
        raise DashboardOptionInvalidError(
            "auth and unsafe_no_auth=True contradict each other: pick one"
        )
    if resolved.auth is not None or resolved.unsafe_no_auth:
        return
    if not resolved.read_only:
        raise DashboardAuthRequiredError(
            "a dashboard that can act needs auth=, e.g. auth=xjobs_web.basic_auth(user, password); "
            "or read_only=True to only look (without auth only where `xjobs web` serves it on "
            "loopback), or unsafe_no_auth=True to let anyone who reaches it act"
        )
    if binding is None or not binding.loopback:
        where = "mounted in a service" if binding is None else f"bound to {binding.host}"
        raise DashboardAuthRequiredError(
            f"a read-only dashboard {where} needs auth= too (only `xjobs web` on loopback serves "
            "one without it), or unsafe_no_auth=True to let anyone who reaches it read every job"
        )
    if ANY in resolved.allowed_hosts:
        raise DashboardAuthRequiredError(
            "allowed_hosts=['*'] without auth lets any web page that rebinds its name to this "
            "address read the dashboard: pass auth= (or unsafe_no_auth=True)"
        )


def resolve_options(
    options: Mapping[str, Any], binding: Binding | None = None
) -> tuple[DashboardOptions, Hosts]:
    """`DashboardOptions` from keyword options, each checked (`XJOBS_DASHBOARD_OPTION_INVALID`,
    `XJOBS_DASHBOARD_AUTH_REQUIRED`), and the Host names the dashboard answers."""
    known = set(DashboardOptions.__dataclass_fields__)
    unknown = sorted(set(options) - known)
    if unknown:
        raise DashboardOptionInvalidError(
            f"unknown dashboard option {unknown[0]!r}; options are {', '.join(sorted(known))}"
        )
    given = dict(options)
    if "allowed_hosts" in given:
        given["allowed_hosts"] = _hosts(given["allowed_hosts"])
    resolved = DashboardOptions(**given)
    for name in ("read_only", "unsafe_no_auth", "secure_cookies"):
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
    hosts = Hosts.of(resolved.allowed_hosts, binding.port if binding else None)
    _check_auth(resolved, binding)
    return resolved, hosts
