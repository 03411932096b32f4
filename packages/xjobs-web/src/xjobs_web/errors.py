"""The dashboard's own refusals, each with a stable code (the core's `XJobsError` base)."""

from __future__ import annotations

from xjobs import XJobsError


class DashboardOptionInvalidError(XJobsError):
    """A dashboard option is of the wrong kind or out of range (refused when the app is built).

    To do: Fix the option as the message says.
    """

    code = "XJOBS_DASHBOARD_OPTION_INVALID"


class DashboardAuthRequiredError(XJobsError):
    """A dashboard that nobody authenticates: one that can act, or one mounted or bound beyond
    loopback, needs `auth` (or the explicit `unsafe_no_auth=True`). Refused when it is built.

    To do: Pass `auth=` (for example `xjobs_web.basic_auth(user, password)`), `read_only=True`
    where that is allowed, or the explicit `unsafe_no_auth=True`.
    """

    code = "XJOBS_DASHBOARD_AUTH_REQUIRED"


class HostRefusedError(XJobsError):
    """The request's Host is not one the dashboard answers (a DNS-rebinding page names its own).

    To do: Add the name the dashboard is reached by to `allowed_hosts` (`--allowed-host`).
    """

    code = "XJOBS_DASHBOARD_HOST_REFUSED"


class TenantDeniedError(XJobsError):
    """The tenant hook named no tenant for this request (None, "" or not a string): it sees nothing.

    To do: Make the tenant hook answer this user's tenant, or `ALL_TENANTS` for an operator of
    every tenant.
    """

    code = "XJOBS_DASHBOARD_TENANT_DENIED"


class FormTooLargeError(XJobsError):
    """An action's form is larger than the dashboard reads (refused before it is read in full).

    To do: Submit a smaller form.
    """

    code = "XJOBS_DASHBOARD_FORM_TOO_LARGE"


class ActionRefusedError(XJobsError):
    """An action the dashboard does not allow here: read-only mode, a tenant-scoped operator
    steering what every tenant shares, a missing or wrong CSRF token.

    To do: Use a dashboard with `auth` that may act, an operator scoped to every tenant for
    shared moves, and reload the page for a fresh CSRF token.
    """

    code = "XJOBS_ACTION_REFUSED"


class ConfirmationInvalidError(XJobsError):
    """An MCP action's confirmation token is unknown, spent, expired, or was issued for other
    arguments: nothing was done; call the tool again without `confirm` for a fresh preview.

    To do: Call the tool again without `confirm`, then confirm the fresh preview.
    """

    code = "XJOBS_CONFIRMATION_INVALID"
