"""The built-in auth hook: HTTP basic auth against one username and password, compared in constant time."""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.requests import Request

from xjobs_web.errors import DashboardOptionInvalidError
from xjobs_web.options import AuthHook


def basic_auth(username: str, password: str) -> AuthHook:
    """An `auth` hook that admits a request whose `Authorization: Basic …` names this user."""
    if not username or not password or ":" in username:
        raise DashboardOptionInvalidError(
            "basic_auth needs a non-empty username without ':' and a non-empty password"
        )
    expected = f"{username}:{password}".encode()

    def check(request: Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic" or not value:
            return False
        try:
            given = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, expected)

    return check
