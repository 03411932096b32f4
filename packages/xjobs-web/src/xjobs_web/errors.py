"""The dashboard's own refusals, each with a stable code (the core's `XJobsError` base)."""

from __future__ import annotations

from xjobs import XJobsError


class DashboardOptionInvalidError(XJobsError):
    """A dashboard option is of the wrong kind or out of range (refused when the app is built)."""

    code = "XJOBS_DASHBOARD_OPTION_INVALID"


class ActionRefusedError(XJobsError):
    """An action the dashboard does not allow here: read-only mode, a tenant-scoped operator
    steering what every tenant shares, a missing or wrong CSRF token."""

    code = "XJOBS_ACTION_REFUSED"
