"""CSRF tokens: a random cookie per browser, and in each form the HMAC, under the dashboard's secret,
of that cookie bound to who asks (the request's Authorization header).

A POST must carry `csrf` equal to that HMAC for its own cookie and its own identity: a page of
another origin can neither read the cookie (HttpOnly, SameSite=Strict) nor compute the HMAC, and a
token (with its cookie) taken by one user is refused for another. Over HTTPS the cookie is
`__Host-` prefixed, so a sibling subdomain cannot plant one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "xjobs_csrf"
SECURE_COOKIE = "__Host-xjobs_csrf"
FIELD = "csrf"
NONCE_BYTES = 24


def cookie_name(secure: bool) -> str:
    """The cookie's name: `__Host-` prefixed when it is Secure (HTTPS, path /, no domain)."""
    return SECURE_COOKIE if secure else COOKIE


def nonce_of(request: Request, secure: bool) -> str | None:
    """The browser's CSRF cookie, if it has a well-formed one."""
    value = request.cookies.get(cookie_name(secure))
    return value if value and len(value) <= 64 and value.isalnum() else None


def new_nonce() -> str:
    """A fresh cookie value."""
    return secrets.token_hex(NONCE_BYTES)


def bound(nonce: str, request: Request) -> str:
    """The cookie's value tied to the request's identity (its Authorization header, hashed):
    what a form's token signs."""
    identity = request.headers.get("authorization", "")
    return f"{nonce}.{hashlib.sha256(identity.encode()).hexdigest()}"


def token(secret: bytes, nonce: str) -> str:
    """The form token for a bound cookie value (`bound`)."""
    return hmac.new(secret, nonce.encode(), hashlib.sha256).hexdigest()


def valid(secret: bytes, request: Request, given: str | None, secure: bool) -> bool:
    """Whether `given` (the form's `csrf` field) is the token of the request's own cookie and identity."""
    nonce = nonce_of(request, secure)
    if nonce is None or not given:
        return False
    return hmac.compare_digest(token(secret, bound(nonce, request)), given)


def set_cookie(response: Response, nonce: str, path: str, secure: bool) -> None:
    """Give the browser its cookie (on the page that first rendered a form with its token)."""
    response.set_cookie(
        cookie_name(secure),
        nonce,
        path="/" if secure else path or "/",
        httponly=True,
        samesite="strict",
        secure=secure,
    )
