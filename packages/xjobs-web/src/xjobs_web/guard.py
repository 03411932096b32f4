"""Every request passes here: the auth hook (401), the tenant hook, and for an action read-only
mode and the CSRF token (403); refusals become error pages with their code."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from xjobs import App, XJobsError
from xjobs.errors import (
    AppStateError,
    BackendClosedError,
    BackendError,
    BackendUnavailableError,
    JobNotFoundError,
    TaskNotRegisteredError,
)
from xjobs_web import csrf
from xjobs_web.errors import ActionRefusedError
from xjobs_web.options import DashboardOptions
from xjobs_web.render import html

T = TypeVar("T")
MAX_FORM_BYTES = 256 * 1024
STATUS = {
    ActionRefusedError.code: 403,
    JobNotFoundError.code: 404,
    TaskNotRegisteredError.code: 404,
    BackendUnavailableError.code: 503,
    BackendError.code: 503,
    BackendClosedError.code: 503,
    AppStateError.code: 503,
}


@dataclass(frozen=True, slots=True)
class Dashboard:
    """One dashboard: the App it reads, its options, its templates."""

    app: App
    options: DashboardOptions
    env: Environment


@dataclass(slots=True)
class Visit:
    """One request as a handler sees it: who may see which tenant, its CSRF nonce, its form."""

    request: Request
    tenant: str | None
    nonce: str
    fresh_nonce: bool
    form: dict[str, list[str]] = field(default_factory=dict)

    @property
    def base(self) -> str:
        """The path the dashboard is mounted at ("" at the root)."""
        return str(self.request.scope.get("root_path", "")).rstrip("/")

    def value(self, name: str) -> str | None:
        """One form field's first value (None when absent or empty)."""
        values = self.form.get(name) or [""]
        return values[0] or None


Handler = Callable[[Dashboard, Visit], Awaitable[Response]]


async def _call(hook: Callable[[Request], T | Awaitable[T]], request: Request) -> T:
    answer = hook(request)
    if inspect.isawaitable(answer):
        return await answer
    return answer


async def _form(request: Request) -> dict[str, list[str]]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise ActionRefusedError(f"a form is at most {MAX_FORM_BYTES} bytes")
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ActionRefusedError("an action is a form post (application/x-www-form-urlencoded)")
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def error_page(dash: Dashboard, visit: Visit | None, exc: XJobsError) -> Response:
    """A refusal as a page: its code, its message, and the HTTP status it maps to (400 by default)."""
    status = STATUS.get(exc.code, 400)
    context: dict[str, Any] = {
        "title": dash.options.title,
        "base": visit.base if visit else "",
        "code": exc.code,
        "message": exc.message,
        "status": status,
        "nav": "",
        "read_only": dash.options.read_only,
        "refresh_seconds": 0,
        "tenant": visit.tenant if visit else None,
    }
    return html(dash.env, "error.html", context, status)


async def _enter(dash: Dashboard, request: Request, action: bool) -> Visit | Response:
    options = dash.options
    if options.auth is not None and not await _call(options.auth, request):
        return PlainTextResponse(
            "authentication required",
            status_code=401,
            headers={"WWW-Authenticate": f'Basic realm="{options.title}", charset="UTF-8"'},
        )
    tenant = await _call(options.tenant, request) if options.tenant is not None else None
    nonce = csrf.nonce_of(request)
    visit = Visit(request, tenant, nonce or csrf.new_nonce(), nonce is None)
    if action:
        if options.read_only:
            raise ActionRefusedError("this dashboard is read-only: it takes no action")
        visit.form = await _form(request)
        if not csrf.valid(options.csrf_secret, request, visit.value(csrf.FIELD)):
            raise ActionRefusedError("the form's CSRF token is missing or wrong; reload the page")
    return visit


def guarded(
    dash: Dashboard, handler: Handler, *, action: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """`handler` behind the auth hook, the tenant hook and (for an action) read-only and CSRF."""

    async def endpoint(request: Request) -> Response:
        visit: Visit | None = None
        try:
            entered = await _enter(dash, request, action)
            if isinstance(entered, Response):
                return entered
            visit = entered
            response = await handler(dash, visit)
        except XJobsError as exc:
            response = error_page(dash, visit, exc)
        if visit is not None and visit.fresh_nonce:
            csrf.set_cookie(response, visit.nonce, visit.base + "/", dash.options.secure_cookies)
        return response

    return endpoint
