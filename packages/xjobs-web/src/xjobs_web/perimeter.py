"""The dashboard's edge, before any route: the Host check (a foreign Host is answered 400, so a
DNS-rebinding page reads nothing and posts nothing) and the security headers on every response."""

from __future__ import annotations

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xjobs_web.errors import HostRefusedError
from xjobs_web.guard import Dashboard, error_page

# no framing (clickjacking), no script, style or fetch but the dashboard's own, no form posted
# elsewhere, no MIME sniffing, no URL (job ids, filters) leaked in a Referer
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


class Perimeter:
    """ASGI middleware of one dashboard: refuse a foreign Host, add the security headers."""

    def __init__(self, app: ASGIApp, dash: Dashboard) -> None:
        self.app = app
        self.dash = dash

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a foreign Host 400 itself; pass the rest on, adding the headers to the answer."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        host = Headers(scope=scope).get("host")
        if not self.dash.hosts.admit(host):
            refused = HostRefusedError(
                f"this dashboard does not answer the host {(host or '')[:100]!r}; name it in "
                "allowed_hosts (xjobs web: --allowed-host)"
            )
            response = error_page(self.dash, None, refused)
            response.headers["Cache-Control"] = "no-store"
            await response(scope, receive, send_guarded)
            return
        await self.app(scope, receive, send_guarded)
