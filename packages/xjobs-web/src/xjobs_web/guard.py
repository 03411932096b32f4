"""Every page and action passes here: the auth hook (401), the tenant hook (403 unless it names a
tenant or ALL_TENANTS), and for an action read-only mode, the form read with a cap (413) and the
CSRF token (403); refusals become error pages with their code, and no page is cached."""

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
    TenantScopeInvalidError,
    TenantScopeSharedError,
)
from xjobs_web import csrf
from xjobs_web.errors import (
    ActionRefusedError,
    FormTooLargeError,
    HostRefusedError,
    TenantDeniedError,
)
from xjobs_web.hosts import Hosts
from xjobs_web.options import ALL_TENANTS, DashboardOptions, TenantAnswer
from xjobs_web.render import html

T = TypeVar("T")
MAX_FORM_BYTES = 256 * 1024
STATUS = {
    ActionRefusedError.code: 403,
    TenantDeniedError.code: 403,
    TenantScopeInvalidError.code: 403,
    TenantScopeSharedError.code: 403,
    HostRefusedError.code: 400,
    FormTooLargeError.code: 413,
    JobNotFoundError.code: 404,
    TaskNotRegisteredError.code: 404,
    BackendUnavailableError.code: 503,
    BackendError.code: 503,
    BackendClosedError.code: 503,
    AppStateError.code: 503,
}


@dataclass(frozen=True, slots=True)
class Dashboard:
    """One dashboard: the App it reads, its options, its templates, the Host names it answers."""

    app: App
    options: DashboardOptions
    env: Environment
    hosts: Hosts


@dataclass(slots=True)
class Visit:
    """One request as a handler sees it: the one tenant it may see (None: every tenant, granted by
    ALL_TENANTS or with no tenant hook), its CSRF cookie and the value its forms' token signs (the
    cookie bound to its identity), its form."""

    request: Request
    tenant: str | None
    cookie: str
    nonce: str
    fresh_cookie: bool
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
    """The form, refused by its declared length before a byte is read, and cut off at the cap
    when it declares none (a chunked body)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ActionRefusedError("an action is a form post (application/x-www-form-urlencoded)")
    too_large = FormTooLargeError(f"a form is at most {MAX_FORM_BYTES} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise too_large
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def _scope(answer: TenantAnswer) -> str | None:
    """The tenant hook's answer as the visit's scope; anything but a tenant id or ALL_TENANTS
    denies (a hook that finds no tenant for a user must not grant them every tenant)."""
    if answer is ALL_TENANTS:
        return None
    if isinstance(answer, str) and answer:
        return answer
    raise TenantDeniedError(
        f"the tenant hook named no tenant for this request ({answer!r}); it answers a tenant id, "
        "or xjobs_web.ALL_TENANTS for an operator of every tenant"
    )


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
    tenant = _scope(await _call(options.tenant, request)) if options.tenant is not None else None
    cookie = csrf.nonce_of(request, options.secure_cookies)
    fresh = cookie or csrf.new_nonce()
    visit = Visit(request, tenant, fresh, csrf.bound(fresh, request), cookie is None)
    if action:
        if options.read_only:
            raise ActionRefusedError("this dashboard is read-only: it takes no action")
        visit.form = await _form(request)
        secret = options.csrf_secret
        if not csrf.valid(secret, request, visit.value(csrf.FIELD), options.secure_cookies):
            raise ActionRefusedError("the form's CSRF token is missing or wrong; reload the page")
    return visit


def guarded(
    dash: Dashboard, handler: Handler, *, action: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """`handler` behind the auth hook, the tenant hook and (for an action) read-only, the form's
    cap and CSRF; its response never cached (it shows job data)."""

    async def endpoint(request: Request) -> Response:
        visit: Visit | None = None
        try:
            entered = await _enter(dash, request, action)
            if isinstance(entered, Response):
                response = entered
            else:
                visit = entered
                response = await handler(dash, visit)
        except XJobsError as exc:
            response = error_page(dash, visit, exc)
        if visit is not None and visit.fresh_cookie:
            csrf.set_cookie(response, visit.cookie, visit.base + "/", dash.options.secure_cookies)
        response.headers["Cache-Control"] = "no-store"
        return response

    return endpoint
