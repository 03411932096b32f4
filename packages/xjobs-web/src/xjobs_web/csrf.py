"""CSRF tokens: a random cookie per browser, and in each form its HMAC under the dashboard's secret.

A POST must carry `csrf` equal to the HMAC of its own cookie: a page of another origin can neither
read the cookie (HttpOnly, SameSite=Strict) nor compute the HMAC, so it cannot forge an action.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "xjobs_csrf"
FIELD = "csrf"
NONCE_BYTES = 24


def nonce_of(request: Request) -> str | None:
    """The browser's CSRF cookie, if it has a well-formed one."""
    value = request.cookies.get(COOKIE)
    return value if value and len(value) <= 64 and value.isalnum() else None


def new_nonce() -> str:
    """A fresh cookie value."""
    return secrets.token_hex(NONCE_BYTES)


def token(secret: bytes, nonce: str) -> str:
    """The form token for a cookie value."""
    return hmac.new(secret, nonce.encode(), hashlib.sha256).hexdigest()


def valid(secret: bytes, request: Request, given: str | None) -> bool:
    """Whether `given` (the form's `csrf` field) is the token of the request's own cookie."""
    nonce = nonce_of(request)
    if nonce is None or not given:
        return False
    return hmac.compare_digest(token(secret, nonce), given)


def set_cookie(response: Response, nonce: str, path: str, secure: bool) -> None:
    """Give the browser its cookie (on the page that first rendered a form with its token)."""
    response.set_cookie(
        COOKIE, nonce, path=path or "/", httponly=True, samesite="strict", secure=secure
    )
