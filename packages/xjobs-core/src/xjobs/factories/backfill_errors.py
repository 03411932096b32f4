"""The backfill and export refusals: one class each; their codes stay declared in `xjobs.errors`."""

from __future__ import annotations

from xjobs import errors
from xjobs.errors import DeclarationInvalidError, Terminal, XJobsError


class BackfillStalledError(Terminal):
    """After the last batch the sweep's `count` still finds rows to sweep: the source stalled.

    To do: Check the source's `count` and page queries agree on which rows remain, then run the
    sweep again.
    """

    code = errors.BACKFILL_STALLED


class BackfillEnvironmentError(Terminal):
    """The sweep is not declared for the environment it was asked to run in.

    To do: Add the environment to the sweep's `environments`, or run it where it is declared.
    """

    code = errors.BACKFILL_ENVIRONMENT


class BackfillRequiresError(XJobsError):
    """A sweep this one `requires` has not completed in this environment yet (the gate).

    To do: Run the required sweep to completion first in this environment.
    """

    code = errors.BACKFILL_REQUIRES


class BackfillAppliedError(XJobsError):
    """The sweep already completed here (the gate): only a `completed` run blocks a rerun.

    To do: Nothing, if the sweep is meant to run once; to run it again, declare a new sweep
    name.
    """

    code = errors.BACKFILL_APPLIED


class BackfillScopeError(Terminal):
    """A tenant scope the sweep may not take: `tenant="none"` is the only cross-tenant scope.

    To do: Sweep one tenant at a time, or declare the sweep `tenant="none"`.
    """

    code = errors.BACKFILL_SCOPE


class BackfillCursorError(Terminal):
    """The source answered a cursor that is not JSON, or the same cursor again (no progress).

    To do: Make the source answer a JSON cursor that moves forward on every page.
    """

    code = errors.BACKFILL_CURSOR


class BackfillInvalidError(DeclarationInvalidError):
    """A `backfill()` or `export_rows()` declaration is malformed (a bad batch, rate, environment…).

    To do: Fix the declaration as the message says.
    """

    code = errors.BACKFILL_INVALID


class ExportScopeError(Terminal):
    """An export without one tenant: `export_rows()` has no cross-tenant escape.

    To do: Export one tenant per job.
    """

    code = errors.EXPORT_SCOPE


class ExportSinkError(Terminal):
    """An object name a sink refuses (empty, absolute, or climbing out of its root).

    To do: Name objects with a relative path inside the sink.
    """

    code = errors.EXPORT_SINK
