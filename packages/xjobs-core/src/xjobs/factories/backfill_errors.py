"""The backfill and export refusals: one class each; their codes stay declared in `xjobs.errors`."""

from __future__ import annotations

from xjobs import errors
from xjobs.errors import DeclarationInvalidError, Terminal, XJobsError


class BackfillStalledError(Terminal):
    """After the last batch the sweep's `count` still finds rows to sweep: the source stalled."""

    code = errors.BACKFILL_STALLED


class BackfillEnvironmentError(Terminal):
    """The sweep is not declared for the environment it was asked to run in."""

    code = errors.BACKFILL_ENVIRONMENT


class BackfillRequiresError(XJobsError):
    """A sweep this one `requires` has not completed in this environment yet (the gate)."""

    code = errors.BACKFILL_REQUIRES


class BackfillAppliedError(XJobsError):
    """The sweep already completed here (the gate): only a `completed` run blocks a rerun."""

    code = errors.BACKFILL_APPLIED


class BackfillScopeError(Terminal):
    """A tenant scope the sweep may not take: `tenant="none"` is the only cross-tenant scope."""

    code = errors.BACKFILL_SCOPE


class BackfillCursorError(Terminal):
    """The source answered a cursor that is not JSON, or the same cursor again (no progress)."""

    code = errors.BACKFILL_CURSOR


class BackfillInvalidError(DeclarationInvalidError):
    """A `backfill()` or `export_rows()` declaration is malformed (a bad batch, rate, environment…)."""

    code = errors.BACKFILL_INVALID


class ExportScopeError(Terminal):
    """An export without one tenant: `export_rows()` has no cross-tenant escape."""

    code = errors.EXPORT_SCOPE


class ExportSinkError(Terminal):
    """An object name a sink refuses (empty, absolute, or climbing out of its root)."""

    code = errors.EXPORT_SINK
