"""The built-in auth hooks: HTTP basic auth against one user or a table of users, passwords compared
in constant time; `basic_user` names the user a checked request came as (for the tenant hook)."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from starlette.requests import Request

from xjobs_web.errors import DashboardOptionInvalidError
from xjobs_web.options import AuthHook


def _credentials(request: Request) -> tuple[str, str] | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        given = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, ValueError):
        return None
    user, colon, password = given.partition(":")
    return (user, password) if colon else None


def basic_auth_users(users: Mapping[str, str]) -> AuthHook:
    """An `auth` hook that admits a request whose `Authorization: Basic …` names one of `users`
    (user name to password) with its password."""
    if not users or any(
        not isinstance(u, str) or not isinstance(p, str) or not u or not p or ":" in u
        for u, p in users.items()
    ):
        raise DashboardOptionInvalidError(
            "basic auth needs at least one user: a non-empty username without ':' and a "
            "non-empty password"
        )
    table = {u: p.encode() for u, p in users.items()}

    def check(request: Request) -> bool:
        given = _credentials(request)
        if given is None:
            return False
        expected = table.get(given[0])
        # compared even for an unknown user, so the time answered does not tell which exist
        matched = hmac.compare_digest(given[1].encode(), expected or b"\0")
        return expected is not None and matched

    return check


def basic_auth(username: str, password: str) -> AuthHook:
    """An `auth` hook that admits a request whose `Authorization: Basic …` names this user."""
    return basic_auth_users({username: password})


def basic_user(request: Request) -> str | None:
    """The user name of the request's basic credentials (meaningful once the auth hook admitted
    it: a tenant hook reads the tenant of the authenticated user from it, never from a header the
    client picks freely)."""
    given = _credentials(request)
    return given[0] if given is not None else None
