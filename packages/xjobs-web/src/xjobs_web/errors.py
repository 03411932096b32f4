"""The dashboard's own refusals, each with a stable code (the core's `XJobsError` base)."""

from __future__ import annotations

from xjobs import XJobsError


class DashboardOptionInvalidError(XJobsError):
    """A dashboard option is of the wrong kind or out of range (refused when the app is built)."""

    code = "XJOBS_DASHBOARD_OPTION_INVALID"


class DashboardAuthRequiredError(XJobsError):
    """A dashboard that nobody authenticates: one that can act, or one mounted or bound beyond
    loopback, needs `auth` (or the explicit `unsafe_no_auth=True`). Refused when it is built."""

    code = "XJOBS_DASHBOARD_AUTH_REQUIRED"


class HostRefusedError(XJobsError):
    """The request's Host is not one the dashboard answers (a DNS-rebinding page names its own)."""

    code = "XJOBS_DASHBOARD_HOST_REFUSED"


class TenantDeniedError(XJobsError):
    """The tenant hook named no tenant for this request (None, "" or not a string): it sees nothing."""

    code = "XJOBS_DASHBOARD_TENANT_DENIED"


class FormTooLargeError(XJobsError):
    """An action's form is larger than the dashboard reads (refused before it is read in full)."""

    code = "XJOBS_DASHBOARD_FORM_TOO_LARGE"


class ActionRefusedError(XJobsError):
    """An action the dashboard does not allow here: read-only mode, a tenant-scoped operator
    steering what every tenant shares, a missing or wrong CSRF token."""

    code = "XJOBS_ACTION_REFUSED"


class ConfirmationInvalidError(XJobsError):
    """An MCP action's confirmation token is unknown, spent, expired, or was issued for other
    arguments: nothing was done; call the tool again without `confirm` for a fresh preview."""

    code = "XJOBS_CONFIRMATION_INVALID"
